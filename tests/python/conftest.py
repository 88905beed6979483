"""Shared fixtures: one validated context per session on the Vulkan
implementation ctest chose (VK_ICD_FILENAMES), and a numpy float64 attention."""
import os
import sys

import numpy as np
import pytest

if "vkattn" not in sys.modules and not any(
        os.path.isdir(os.path.join(p, "vkattn")) for p in sys.path if p):
    # run from the source tree without PYTHONPATH: use python/ (needs VKATTN_LIBRARY)
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

import vkattn  # noqa: E402


@pytest.fixture(scope="session")
def ctx():
    c = vkattn.Context(validate=True)
    # ctest names the implementation it selected with VK_ICD_FILENAMES
    impl = os.environ.get("VKATTN_TEST_IMPL", "")
    expect = {"lavapipe": "llvmpipe", "lavapipe25": "llvmpipe", "swiftshader": "swiftshader"}.get(impl)
    assert expect is None or expect in c.device["name"].lower(), (impl, c.device["name"])
    yield c
    errors, warnings = c.validation_counts()
    messages = list(c.messages)
    c.close()
    assert (errors, warnings) == (0, 0), "validation messages:\n" + "\n".join(messages)


@pytest.fixture(autouse=True)
def no_validation_messages(request):
    """Every test that used the context leaves no validation message."""
    yield
    if "ctx" in request.fixturenames:
        c = request.getfixturevalue("ctx")
        if not c.closed:
            assert c.validation_counts() == (0, 0), "\n".join(c.messages)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def np_attention(q, k, v, causal=False, mask=None, scale=None, weights=False):
    """softmax(scale q k^T + mask) v in float64; mask additive, broadcast to
    [B, Hq, Tq, Tk]; causal bottom-right; empty rows give zeros."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    B, Hq, Tq, D = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    k = np.repeat(k, Hq // Hkv, axis=1)
    v = np.repeat(v, Hq // Hkv, axis=1)
    s = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / np.sqrt(D) if scale is None else scale)
    if mask is not None:
        s = s + np.broadcast_to(np.asarray(mask, dtype=np.float64), s.shape)
    if causal:
        i = np.arange(Tq)[:, None]
        j = np.arange(Tk)[None, :]
        s = np.where(j <= i + Tk - Tq, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    den = e.sum(axis=-1, keepdims=True)
    p = np.divide(e, den, out=np.zeros_like(e), where=den > 0)
    out = p @ v
    return (out, p) if weights else out


def close(a, b, tol):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    err = np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b)))
    assert err <= tol, "max error %g > %g" % (err, tol)
