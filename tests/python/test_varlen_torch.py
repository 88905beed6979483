"""Packed ragged sequences against torch (issue 30): the fixtures that
tools/gen_torch_fixtures.py wrote by running each sequence alone in torch
(scaled dot-product attention in float64, nn.MultiheadAttention in float32)
and concatenating the results, through cu_seqlens / cu_seqlens_k on
Context.attention, the layer and the reference."""
import numpy as np
import pytest

import vkattn
from conftest import close
from test_mha_appended import load, torch_state

ATTENTION = ["attn_varlen_gqa_causal", "attn_varlen_cross_window_softcap"]
LAYER = ["mha_varlen_causal", "mha_varlen_cross_kdim_vdim"]
DTYPES = [("f32", 2e-4), ("f16", 1.5e-2)]


def close_lse(got, want, tol):
    """Elementwise |got - want| <= tol (1 + |want|); -inf rows (nothing
    visible) must be -inf."""
    hidden = np.isneginf(want)
    assert np.array_equal(np.isneginf(got), hidden)
    assert np.all(np.abs(got[~hidden] - want[~hidden]) <= tol * (1 + np.abs(want[~hidden])))


@pytest.mark.parametrize("name", ATTENTION)
@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_attention_matches_torch(ctx, name, dtype, tol):
    meta, a = load(name)
    opts = dict(causal=meta["causal"] == "1", window=int(meta["window"]),
                softcap=float(meta["softcap"]), cu_seqlens=a["q_offsets"],
                cu_seqlens_k=a["k_offsets"], return_lse=True)
    out, lse = ctx.attention(a["q"], a["k"], a["v"], dtype=dtype, **opts)
    close(out, a["out"], tol)
    close_lse(lse, a["lse"], tol)
    ro, rl = vkattn.reference.attention(a["q"], a["k"], a["v"], **opts)
    close(ro, a["out"], 2e-5)
    close_lse(rl, a["lse"], 2e-5)


@pytest.mark.parametrize("name", LAYER)
@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_layer_matches_torch(ctx, name, dtype, tol):
    meta, a = load(name)
    Dm, H = a["x"].shape[2], int(meta["heads"])
    opts = dict(kdim=a["wk"].shape[1], vdim=a["wv"].shape[1])
    layer = vkattn.MultiheadAttention(ctx, Dm, H, dtype=dtype, **opts)
    layer.load_state_dict(torch_state(a))
    args = dict(causal=meta["causal"] == "1", cu_seqlens=a["seq_offsets"],
                cu_seqlens_k=a.get("kv_offsets"))
    kv, value = a.get("kv"), a.get("value")
    close(layer(a["x"], kv, value, **args), a["y"], tol)
    close(layer.reference(a["x"], kv, value, **args), a["y"], 2e-5)
