"""The CLI's training flags against torch autograd in float64.

`vkattn attention ... --grad-out DO.npy --grads P` (P.dq/.dk/.dv.npy) against an
explicit float64 attention (torch 1.13 has no scaled_dot_product_attention),
and `vkattn mha ... --grad-out DY.npy --grads P` against
torch.nn.MultiheadAttention in float64 with the same weights.

The CLI is $VKATTN_CLI, else <build>/tools/vkattn beside the <build>/python the
vkattn package was imported from (test_python's PYTHONPATH), else the source
tree's build/tools/vkattn. It inherits VK_ICD_FILENAMES, so it runs on the
implementation ctest chose, as the rest of tests/python does."""
import os
import subprocess

import numpy as np
import pytest

import vkattn

torch = pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))


def _find_cli():
    env = os.environ.get("VKATTN_CLI")
    if env:
        return env
    pkg_build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(vkattn.__file__))))
    for cand in (os.path.join(pkg_build, "tools", "vkattn"),
                 os.path.join(HERE, "..", "..", "build", "tools", "vkattn")):
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return os.path.abspath(cand)
    return None


CLI = _find_cli()
if CLI is None or not os.path.isfile(CLI):
    pytest.skip("vkattn CLI not built (set VKATTN_CLI)", allow_module_level=True)

F32_TOL = 2e-4
F16_TOL = 2e-2


def run_cli(tmp_path, sub, arrays, flags):
    """Saves arrays {flag: ndarray} as .npy files and runs `vkattn sub`."""
    argv = [CLI, sub]
    for flag, arr in arrays.items():
        path = str(tmp_path / (flag.strip("-") + ".npy"))
        np.save(path, arr)
        argv += [flag, path]
    argv += [str(f) for f in flags]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, "%s\n%s%s" % (" ".join(argv), r.stdout, r.stderr)


def rel_err(got, want, floor=0.0):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    return np.max(np.abs(got - want)) / max(np.max(np.abs(want)), floor, 1e-30)


# ------------------------------------------------------------------ attention

def torch_attention(q, k, v, scale=None, causal=None, mask=None, pad=None, window=0,
                    softcap=0.0, sinks=None, slopes=None):
    """float64 attention; causal None, "br" (bottom-right) or "tl" (top-left);
    mask additive float or boolean (True attends), broadcast to [B,Hq,Tq,Tk]."""
    B, Hq, Tq, Dk = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    k = k.repeat_interleave(Hq // Hkv, dim=1)
    v = v.repeat_interleave(Hq // Hkv, dim=1)
    s = (q @ k.transpose(-1, -2)) * (1.0 / np.sqrt(Dk) if scale is None else scale)
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    ipos = torch.arange(Tq, dtype=torch.float64)[:, None] + (0 if causal == "tl" else Tk - Tq)
    j = torch.arange(Tk, dtype=torch.float64)[None, :]
    hidden = torch.zeros(B, Hq, Tq, Tk, dtype=torch.bool)
    if mask is not None:
        m = torch.as_tensor(mask)
        if m.dtype == torch.bool:
            hidden = hidden | ~m
        else:
            s = s + m.to(torch.float64)
    if slopes is not None:
        s = s - torch.as_tensor(slopes, dtype=torch.float64)[None, :, None, None] * (ipos - j).abs()
    if causal:
        hidden = hidden | (j > ipos)
    if window:
        hidden = hidden | (ipos - j >= window)
        if not causal:
            hidden = hidden | (j - ipos >= window)
    if pad is not None:
        hidden = hidden | ~torch.as_tensor(pad.astype(bool))[:, None, None, :]
    s = s.masked_fill(hidden, -np.inf)
    if sinks is not None:
        sk = torch.as_tensor(sinks, dtype=torch.float64)[None, :, None, None].expand(B, Hq, Tq, 1)
        p = torch.softmax(torch.cat([s, sk], dim=-1), dim=-1)[..., :Tk]
    else:
        p = torch.softmax(s, dim=-1)
    return p @ v


ATTN_CASES = {
    # name: (B, Hq, Hkv, Tq, Tk, Dk, Dv, options)
    "plain": (2, 2, 2, 9, 9, 16, 16, {}),
    "causal": (2, 2, 2, 7, 12, 16, 16, {"causal": "br"}),
    "causal_top_left": (1, 2, 2, 12, 7, 16, 16, {"causal": "tl"}),
    "additive_mask": (2, 2, 2, 8, 11, 16, 16, {"mask": "float"}),
    "bool_mask": (2, 2, 2, 8, 11, 16, 16, {"mask": "bool"}),
    "key_padding": (2, 2, 2, 6, 10, 16, 16, {"pad": True}),
    "window": (1, 2, 2, 13, 13, 16, 16, {"window": 4}),
    "window_causal": (1, 2, 2, 13, 13, 16, 16, {"window": 4, "causal": "br"}),
    "softcap": (2, 2, 2, 9, 9, 16, 16, {"softcap": 2.0}),
    "alibi": (1, 4, 4, 10, 10, 16, 16, {"alibi": True}),
    "sinks": (2, 2, 2, 9, 9, 16, 16, {"sinks": True}),
    "scale": (1, 2, 2, 9, 9, 16, 16, {"scale": 0.5}),
    "gqa": (2, 4, 2, 9, 33, 16, 16, {"causal": "br"}),
    "mqa": (1, 4, 1, 9, 9, 32, 32, {}),
    "dk_ne_dv": (1, 2, 2, 9, 9, 24, 8, {}),
    "dims_mult4": (1, 2, 2, 5, 7, 12, 20, {}),  # multiples of 4, not 8 (the backward needs 4)
    "f16": (1, 2, 2, 9, 9, 16, 16, {"dtype": "f16"}),
}


@pytest.mark.parametrize("name", list(ATTN_CASES))
def test_attention_grads(tmp_path, name):
    B, Hq, Hkv, Tq, Tk, Dk, Dv, o = ATTN_CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    q, k, v, do = r(B, Hq, Tq, Dk), r(B, Hkv, Tk, Dk), r(B, Hkv, Tk, Dv), r(B, Hq, Tq, Dv)
    arrays = {"--q": q, "--k": k, "--v": v, "--grad-out": do}
    flags = ["--out", tmp_path / "o.npy", "--grads", tmp_path / "g"]
    kw = {}
    if o.get("causal") == "br":
        flags.append("--causal")
        kw["causal"] = "br"
    elif o.get("causal") == "tl":
        flags.append("--causal-top-left")
        kw["causal"] = "tl"
    if o.get("mask") == "float":
        m = r(Tq, Tk)
        m[rng.random((Tq, Tk)) < 0.2] = -np.inf
        m[:, 0] = 0.0  # every row keeps a key
        arrays["--mask"] = m
        kw["mask"] = m
    elif o.get("mask") == "bool":
        m = rng.random((B, Hq, Tq, Tk)) < 0.7
        m[..., 0] = True
        arrays["--mask"] = m
        kw["mask"] = m
    if o.get("pad"):
        p = np.ones((B, Tk), np.uint8)
        p[0, -3:] = 0
        p[1, :2] = 0
        arrays["--key-padding"] = p
        kw["pad"] = p
    if o.get("window"):
        flags += ["--window", o["window"]]
        kw["window"] = o["window"]
    if o.get("softcap"):
        flags += ["--softcap", o["softcap"]]
        kw["softcap"] = o["softcap"]
    if o.get("alibi"):
        sl = (0.5 ** np.arange(1, Hq + 1)).astype(np.float32)
        arrays["--alibi-slopes"] = sl
        kw["slopes"] = sl
    if o.get("sinks"):
        sk = r(Hq)
        arrays["--sinks"] = sk
        kw["sinks"] = sk
    if o.get("scale"):
        flags += ["--scale", o["scale"]]
        kw["scale"] = o["scale"]
    tol = F32_TOL
    if o.get("dtype"):
        flags += ["--dtype", o["dtype"]]
        tol = F16_TOL
    run_cli(tmp_path, "attention", arrays, flags)

    tq, tk, tv = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v))
    out = torch_attention(tq, tk, tv, **kw)
    np.testing.assert_allclose(np.load(tmp_path / "o.npy"), out.detach().numpy(),
                               atol=tol * out.abs().max().item() * 5)
    grads = torch.autograd.grad((out * torch.tensor(do, dtype=torch.float64)).sum(), (tq, tk, tv))
    errs = {}
    for gname, want in zip(("dq", "dk", "dv"), grads):
        got = np.load(tmp_path / ("g.%s.npy" % gname))
        assert got.dtype == np.float32
        errs[gname] = rel_err(got, want.numpy())
    print(name, " ".join("%s %.2e" % kv for kv in errs.items()))
    bad = {g: e for g, e in errs.items() if not e <= tol}
    assert not bad, "%s: %s > %g" % (name, bad, tol)


# ------------------------------------------------------------------------ mha

MHA_CASES = {
    # name: (B, Tq, Tk or None (self), E, H, causal)
    "self_causal_bias": (2, 7, None, 32, 4, True),
    "self_bias": (1, 9, None, 32, 2, False),
    "cross_bias": (2, 5, 8, 32, 4, False),
}


@pytest.mark.parametrize("name", list(MHA_CASES))
def test_mha_grads(tmp_path, name):
    B, Tq, Tk, E, H, causal = MHA_CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(E, H, bias=True, batch_first=True, dtype=torch.float64)
    with torch.no_grad():  # nonzero biases, float32-representable weights
        mha.in_proj_bias.copy_(torch.tensor(rng.standard_normal(3 * E) * 0.1))
        mha.out_proj.bias.copy_(torch.tensor(rng.standard_normal(E) * 0.1))
        for p in mha.parameters():
            p.copy_(p.float().double())
    x = rng.standard_normal((B, Tq, E)).astype(np.float32)
    dy = rng.standard_normal((B, Tq, E)).astype(np.float32)
    w = mha.in_proj_weight.detach().numpy().astype(np.float32)
    b = mha.in_proj_bias.detach().numpy().astype(np.float32)
    arrays = {"--x": x, "--wq": w[:E], "--wk": w[E:2 * E], "--wv": w[2 * E:],
              "--wo": mha.out_proj.weight.detach().numpy().astype(np.float32),
              "--bq": b[:E], "--bk": b[E:2 * E], "--bv": b[2 * E:],
              "--bo": mha.out_proj.bias.detach().numpy().astype(np.float32),
              "--grad-out": dy}
    flags = ["--heads", H, "--out", tmp_path / "y.npy", "--grads", tmp_path / "g"]
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    inputs = [tx]
    kv = tx
    if Tk is not None:
        c = rng.standard_normal((B, Tk, E)).astype(np.float32)
        arrays["--kv"] = c
        kv = torch.tensor(c, dtype=torch.float64, requires_grad=True)
        inputs.append(kv)
    attn_mask = None
    if causal:
        flags.append("--causal")
        T = Tq if Tk is None else Tk
        attn_mask = torch.ones(Tq, T, dtype=torch.bool).triu(1 + T - Tq)  # True blocks
    run_cli(tmp_path, "mha", arrays, flags)

    y, _ = mha(tx, kv, kv, attn_mask=attn_mask, need_weights=False)
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), y.detach().numpy(),
                               atol=F32_TOL * y.abs().max().item())
    params = [mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias]
    g = torch.autograd.grad((y * torch.tensor(dy, dtype=torch.float64)).sum(), inputs + params)
    gin, (giw, gib, gow, gob) = g[:len(inputs)], g[len(inputs):]
    want = {"dx": gin[0]}
    if Tk is not None:
        want["dkv"] = gin[1]
    for i, proj in enumerate(("q_proj", "k_proj", "v_proj")):
        want[proj + ".weight"] = giw[i * E:(i + 1) * E]
        want[proj + ".bias"] = gib[i * E:(i + 1) * E]
    want["o_proj.weight"] = gow
    want["o_proj.bias"] = gob
    want = {n: t.numpy() for n, t in want.items()}
    floor = max(np.max(np.abs(t)) for t in want.values())
    errs = {}
    for n, t in want.items():
        got = np.load(tmp_path / ("g.%s.npy" % n))
        # k_proj.bias's gradient is exactly 0 (softmax is shift invariant):
        # measured against the largest gradient of the layer
        errs[n] = rel_err(got, t, floor if n == "k_proj.bias" else 0.0)
    print(name, " ".join("%s %.2e" % kv for kv in errs.items()))
    bad = {n: e for n, e in errs.items() if not e <= F32_TOL}
    assert not bad, "%s: %s > %g" % (name, bad, F32_TOL)
