"""vkattn.torch.scaled_dot_product_attention and its autograd: the CPU
reference path under torch.autograd.gradcheck (float64), the device (float32,
float16, bfloat16) against torch's autograd of the attention formula in
float64, for every forward option, and dropout's mask against
vkattn_dropout_bits. Skipped where torch is not installed."""
import math
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import vkattn  # noqa: E402
import vkattn.torch as vt  # noqa: E402
from vkattn import _lib  # noqa: E402

L = _lib.lib
# max |got - want| / max |want| over the whole tensor, per output and gradient
TOL = {torch.float32: 2e-4, torch.float16: 2e-2, torch.bfloat16: 2e-2}
DTYPES = list(TOL)


def formula(q, k, v, attn_mask=None, is_causal=False, scale=None, enable_gqa=False,
            softcap=0.0, window=0, sinks=None, alibi_slopes=None, key_padding_mask=None,
            causal_align="top_left", keep=None, dropout_p=0.0, **_):
    """Attention as include/vkattn/ops.h writes it, in float64 torch ops
    (autograd gives the gradients): softcap(scale q k^T) + mask - ALiBi,
    causal / window / boolean mask / key padding hide keys, sinks join the
    denominator, rows with nothing visible give zeros, dropout's keep mask
    scaled by 1 / (1 - p)."""
    B, Hq, Tq, Dk = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    k = k.repeat_interleave(Hq // Hkv, dim=1)
    v = v.repeat_interleave(Hq // Hkv, dim=1)
    s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(Dk) if scale is None else scale)
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    shift = Tk - Tq if causal_align == "bottom_right" else 0
    i = torch.arange(Tq, dtype=torch.float64)[:, None] + shift  # aligned query position
    j = torch.arange(Tk, dtype=torch.float64)[None, :]
    visible = torch.ones(B, Hq, Tq, Tk, dtype=torch.bool)
    if is_causal:
        visible = visible & (j <= i)
    if window:
        visible = visible & (i - j < window) & (j - i < window)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            visible = visible & attn_mask
        else:
            s = s + attn_mask.double()
    if key_padding_mask is not None:
        visible = visible & ~key_padding_mask[:, None, None, :]
    if alibi_slopes is not None:
        s = s - alibi_slopes.double()[None, :, None, None] * (i - j).abs()
    s = s.masked_fill(~visible, -math.inf)
    if sinks is not None:
        s = torch.cat([s, sinks[None, :, None, None].expand(B, Hq, Tq, 1)], dim=-1)
    empty = ~visible.any(dim=-1, keepdim=True)
    p = torch.softmax(s.masked_fill(empty, 0.0), dim=-1)[..., :Tk].masked_fill(empty, 0.0)
    if keep is not None:
        p = p * torch.as_tensor(keep) / (1.0 - dropout_p)
    return p @ v


def rel(got, want):
    """max abs error / max abs value of the float64 answer."""
    got, want = got.detach().double(), want.detach().double()
    assert got.shape == want.shape, (got.shape, want.shape)
    assert torch.isfinite(got).all()
    return float((got - want).abs().max() / max(float(want.abs().max()), 1e-30))


# ------------------------------------------------------------------ options
# (name, shape (B, Hq, Hkv, Tq, Tk, Dk, Dv), keywords from a generator)
SHAPE = (2, 4, 4, 9, 13, 16, 16)


def _bool_mask(g, *shape):
    m = torch.rand(*shape, generator=g) > 0.4
    m[..., 0] = True  # every row keeps a key
    return m


def _pad(g, B, Tk, full_row=False):
    m = torch.zeros(B, Tk, dtype=torch.bool)
    m[1, -4:] = True
    m[0, 2] = True
    if full_row:
        m[1, :] = True  # batch row 1 sees nothing: zeros and zero gradients
    return m


CASES = [
    ("plain", SHAPE, lambda g: {}),
    ("long", (1, 2, 2, 33, 33, 64, 64), lambda g: {}),
    ("scale", SHAPE, lambda g: {"scale": 0.3}),
    ("causal", SHAPE, lambda g: {"is_causal": True}),
    ("causal_tall", (2, 4, 4, 13, 9, 16, 16), lambda g: {"is_causal": True}),
    ("causal_bottom_right", SHAPE,
     lambda g: {"is_causal": True, "causal_align": "bottom_right"}),
    ("mask_float", SHAPE,
     lambda g: {"attn_mask": torch.randn(2, 1, 9, 13, generator=g)}),
    ("mask_bool", SHAPE, lambda g: {"attn_mask": _bool_mask(g, 9, 13)}),
    ("mask_bool_4d", SHAPE, lambda g: {"attn_mask": _bool_mask(g, 2, 4, 9, 13)}),
    ("key_padding", SHAPE, lambda g: {"key_padding_mask": _pad(g, 2, 13)}),
    ("empty_rows", SHAPE, lambda g: {"key_padding_mask": _pad(g, 2, 13, True)}),
    ("window", SHAPE, lambda g: {"window": 4}),
    ("window_causal", SHAPE, lambda g: {"window": 3, "is_causal": True}),
    ("softcap", SHAPE, lambda g: {"softcap": 5.0, "scale": 1.0}),
    ("alibi", SHAPE, lambda g: {"alibi_slopes": torch.rand(4, generator=g) + 0.1}),
    ("sinks", SHAPE, lambda g: {"sinks": torch.randn(4, generator=g)}),
    ("gqa", (2, 4, 2, 9, 13, 16, 16), lambda g: {"enable_gqa": True}),
    ("mqa", (2, 4, 1, 9, 13, 16, 16), lambda g: {"enable_gqa": True, "is_causal": True}),
    ("dk_ne_dv", (2, 4, 4, 9, 13, 16, 24), lambda g: {}),
    ("everything", (2, 4, 2, 11, 14, 8, 16),
     lambda g: {"enable_gqa": True, "is_causal": True, "window": 6, "softcap": 4.0,
                "sinks": torch.randn(4, generator=g),
                "alibi_slopes": torch.rand(4, generator=g) * 0.5,
                "attn_mask": torch.randn(1, 4, 11, 14, generator=g),
                "key_padding_mask": _pad(g, 2, 14), "scale": 0.5}),
]


def make(shape, dtype, seed=0):
    """q, k, v and dout rounded to dtype (leaves requiring grad)."""
    B, Hq, Hkv, Tq, Tk, Dk, Dv = shape
    g = torch.Generator().manual_seed(seed)

    def rnd(*s):
        return torch.randn(*s, generator=g, dtype=torch.float64).to(dtype)
    q, k, v = rnd(B, Hq, Tq, Dk), rnd(B, Hkv, Tk, Dk), rnd(B, Hkv, Tk, Dv)
    return [t.requires_grad_() for t in (q, k, v)], rnd(B, Hq, Tq, Dv), g


def against_formula(ctx, dtype, shape, options, seed=0, keep=None, **extra):
    """Runs vkattn.torch (forward and backward) and the float64 formula on the
    same (rounded) inputs; returns {name: relative error}. `keep`: the
    dropout mask, for the formula only (vkattn is told the seed)."""
    (q, k, v), dout, g = make(shape, dtype, seed)
    kw = options(g) if callable(options) else dict(options)
    sinks = kw.pop("sinks", None)
    leaves = [q, k, v]
    if sinks is not None:
        sinks = sinks.detach().float().clone().requires_grad_()  # a leaf of this run
        leaves.append(sinks)
    out = vt.scaled_dot_product_attention(q, k, v, sinks=sinks, ctx=ctx, **kw, **extra)
    assert out.dtype == dtype and out.shape == dout.shape
    out.backward(dout)
    ref_leaves = [t.detach().double().requires_grad_() for t in leaves]
    s64 = ref_leaves[3] if sinks is not None else None
    want = formula(*ref_leaves[:3], sinks=s64, keep=keep, **kw, **extra)
    want.backward(dout.double())
    names = ["out", "dq", "dk", "dv", "dsinks"]
    errs = {"out": rel(out, want)}
    for name, t, r in zip(names[1:], leaves, ref_leaves):
        assert t.grad.dtype == t.dtype
        errs[name] = rel(t.grad, r.grad)
    return errs


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).split(".")[1])
@pytest.mark.parametrize("name,shape,options", CASES, ids=[c[0] for c in CASES])
def test_device_gradients_match_float64(ctx, dtype, name, shape, options):
    errs = against_formula(ctx, dtype, shape, options)
    print("%s %s: %s" % (name, dtype, " ".join("%s %.2e" % kv for kv in errs.items())))
    bad = {n: e for n, e in errs.items() if e > TOL[dtype]}
    assert not bad, "max abs error / max abs value over %g: %s" % (TOL[dtype], bad)


def test_empty_rows_give_zeros(ctx):
    (q, k, v), dout, g = make(SHAPE, torch.float32)
    kpm = _pad(g, 2, 13, full_row=True)
    out = vt.scaled_dot_product_attention(q, k, v, key_padding_mask=kpm, ctx=ctx)
    out.backward(dout)
    assert torch.all(out[1] == 0) and torch.all(q.grad[1] == 0)
    assert torch.all(k.grad[1] == 0) and torch.all(v.grad[1] == 0)
    assert out[0].abs().max() > 0 and q.grad[0].abs().max() > 0


# ------------------------------------------------------------ the reference
# gradcheck on float64 tensors: the reference rounds them to f32 and computes
# in double, so finite differences use eps 1e-3 (1e-6 would sit at f32's
# rounding) and the tolerances allow f32 rounding of inputs and outputs.
GRADCHECK = dict(eps=1e-3, atol=1e-4, rtol=1e-3)
SMALL = (1, 2, 2, 4, 5, 4, 4)
REF_CASES = [
    ("plain", SMALL, {}),
    ("causal", (1, 2, 2, 5, 4, 4, 4), {"is_causal": True}),
    ("causal_bottom_right", SMALL, {"is_causal": True, "causal_align": "bottom_right"}),
    ("mask_float", SMALL, {"attn_mask": torch.tensor([[0.5, -1.0, 0.0, 2.0, -0.3]])}),
    ("mask_bool", SMALL, {"attn_mask": torch.tensor([[True, False, True, True, False]] * 4)}),
    ("key_padding", SMALL, {"key_padding_mask": torch.tensor([[False, False, True, False,
                                                              True]])}),
    ("gqa", (1, 4, 2, 3, 5, 4, 4), {"enable_gqa": True}),
    ("mqa", (1, 3, 1, 3, 4, 4, 4), {"enable_gqa": True}),
    ("softcap", SMALL, {"softcap": 1.5, "scale": 1.0}),
    ("sinks", SMALL, {"sinks": torch.tensor([0.3, -0.7])}),
    ("alibi", SMALL, {"alibi_slopes": torch.tensor([0.25, 0.5])}),
    ("window", (1, 2, 2, 5, 5, 4, 4), {"window": 2}),
    ("dk_ne_dv", (1, 2, 2, 4, 5, 3, 5), {}),
    ("dropout", SMALL, {"dropout_p": 0.3, "dropout_seed": 77}),
    ("everything", (2, 4, 2, 4, 6, 4, 3),
     {"enable_gqa": True, "is_causal": True, "window": 3, "softcap": 2.0, "scale": 0.7,
      "sinks": torch.tensor([0.1, -0.2, 0.5, 0.0]), "alibi_slopes": torch.tensor([0.1, 0.2,
                                                                                   0.3, 0.4]),
      "dropout_p": 0.2, "dropout_seed": 5}),
]


def _ref_inputs(shape, kw, seed=1):
    """float64 leaves holding f32 values (so the reference's rounding of
    the inputs is exact), sinks among them when the case has them."""
    (q, k, v), _, _ = make(shape, torch.float32, seed)
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    kw = dict(kw)
    if "sinks" in kw:
        leaves.append(kw.pop("sinks").double().requires_grad_())
    return leaves, kw


def _call(kw):
    def f(q, k, v, sinks=None):
        return vt.scaled_dot_product_attention(q, k, v, sinks=sinks, **kw)
    return f


@pytest.mark.parametrize("name,shape,kw", REF_CASES, ids=[c[0] for c in REF_CASES])
def test_reference_gradcheck(name, shape, kw):
    leaves, kw = _ref_inputs(shape, kw)
    assert torch.autograd.gradcheck(_call(kw), tuple(leaves), **GRADCHECK)


@pytest.mark.parametrize("name,shape,kw", REF_CASES, ids=[c[0] for c in REF_CASES])
def test_reference_matches_formula(name, shape, kw):
    """The reference path's float64 results against the formula's, to f32
    rounding of the outputs (its inputs hold f32 values exactly)."""
    leaves, kw = _ref_inputs(shape, kw)
    B, Hq, _, Tq, Tk = shape[:5]
    keep = None
    if kw.get("dropout_p"):
        keep = vt.dropout_keep(kw["dropout_seed"], (B, Hq, Tq, Tk), kw["dropout_p"])
    out = _call(kw)(*leaves)
    assert out.dtype == torch.float64
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(2),
                       dtype=torch.float64)
    out.backward(dout)
    mine = [out] + [t.grad for t in leaves]
    ref = [t.detach().clone().requires_grad_() for t in leaves]
    want = formula(*ref[:3], sinks=ref[3] if len(ref) > 3 else None, keep=keep, **kw)
    want.backward(dout)
    for got, w in zip(mine, [want] + [t.grad for t in ref]):
        assert rel(got, w) < 2e-6


def test_reference_flag_and_16bit_inputs():
    """reference=True takes a float32 / float16 call to the CPU: the same
    numbers the float64 path gives for those values."""
    for dtype in (torch.float32, torch.float16):
        (q, k, v), dout, _ = make(SMALL, dtype, 3)
        out = vt.scaled_dot_product_attention(q, k, v, is_causal=True, reference=True)
        out.backward(dout)
        leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
        want = formula(*leaves, is_causal=True)
        want.backward(dout.double())
        assert out.dtype == dtype
        for got, w in zip([out, q.grad, k.grad, v.grad], [want] + [t.grad for t in leaves]):
            assert rel(got, w) < (1e-3 if dtype == torch.float16 else 2e-6)


def test_formula_against_torch_sdpa():
    """The formula above is torch's own SDPA where torch has one (2.0+)."""
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    if sdpa is None:
        pytest.skip("torch %s has no scaled_dot_product_attention" % torch.__version__)
    (q, k, v), _, g = make(SHAPE, torch.float64)
    for kw in ({}, {"is_causal": True}, {"scale": 0.3},
               {"attn_mask": _bool_mask(g, 9, 13)}, {"attn_mask": torch.randn(9, 13)}):
        a = sdpa(q, k, v, **kw)
        b = formula(q, k, v, **kw)
        assert rel(a, b) < 1e-12
        assert rel(vt.scaled_dot_product_attention(q, k, v, **kw), a) < 2e-6


# ------------------------------------------------------------------ dropout
def keep_from_bits(seed, shape, p):
    """The keep mask from the bound vkattn_dropout_bits, element by element."""
    threshold = L.vkattn_dropout_threshold(p)
    assert threshold == math.floor(float(np.float32(p)) * 2.0 ** 32)  # p is a C float
    bits = np.zeros(shape, dtype=np.uint32)
    for b, h, i, j in np.ndindex(*shape):
        bits[b, h, i, j] = L.vkattn_dropout_bits(seed, b, h, i, j)
    return bits >= threshold, bits


def test_dropout_bits_repeat():
    seed, shape, p = 0x0123456789ABCDEF, (2, 2, 5, 9), 0.25
    keep, bits = keep_from_bits(seed, shape, p)
    again, bits2 = keep_from_bits(seed, shape, p)
    assert np.array_equal(bits, bits2) and np.array_equal(keep, again)
    assert np.array_equal(vt.dropout_keep(seed, shape, p), keep)
    _, other = keep_from_bits(seed + 1, shape, p)
    _, high = keep_from_bits(seed ^ (1 << 40), shape, p)  # the key's high word counts
    assert np.mean(bits == other) < 0.01 and np.mean(bits == high) < 0.01
    assert 0.6 < keep.mean() < 0.9  # 180 draws, keep 0.75
    assert L.vkattn_dropout_threshold(0.0) == 0


DROPOUT_CASES = [
    ("plain", (2, 2, 2, 7, 10, 8, 8), {}),
    ("gqa_causal_sinks", (2, 4, 2, 9, 9, 8, 16),
     {"enable_gqa": True, "is_causal": True, "sinks": torch.tensor([0.5, -0.5, 1.0, 0.0])}),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).split(".")[1])
@pytest.mark.parametrize("name,shape,kw", DROPOUT_CASES, ids=[c[0] for c in DROPOUT_CASES])
def test_dropout_device_matches_bits(ctx, dtype, name, shape, kw):
    """The device's dropout is the mask vkattn_dropout_bits >= threshold
    (query head h, the batch row b), forward and backward."""
    seed, p = 0xFEEDFACE12345678, 0.3
    B, Hq, _, Tq, Tk = shape[:5]
    keep, _ = keep_from_bits(seed, (B, Hq, Tq, Tk), p)
    errs = against_formula(ctx, dtype, shape, kw, keep=keep, dropout_p=p, dropout_seed=seed)
    print("dropout %s %s: %s" % (name, dtype, " ".join("%s %.2e" % e for e in errs.items())))
    assert max(errs.values()) <= TOL[dtype], errs
    # the mask matters: without it the formula is far off
    (q, k, v), _, _ = make(shape, dtype)
    sinks = kw.get("sinks")
    rest = {n: x for n, x in kw.items() if n != "sinks"}
    out = vt.scaled_dot_product_attention(q, k, v, dropout_p=p, dropout_seed=seed, ctx=ctx,
                                          sinks=sinks, **rest)
    leaves = [t.detach().double() for t in (q, k, v)]
    s64 = None if sinks is None else sinks.double()
    assert rel(out, formula(*leaves, sinks=s64, **rest)) > 0.05
    assert rel(out, formula(*leaves, sinks=s64, keep=keep, dropout_p=p, **rest)) <= TOL[dtype]


def _keep_for(seed, shape, p):
    return keep_from_bits(seed, shape, p)[0]


def test_dropout_seed_from_torch(ctx):
    """dropout_seed None draws from torch's generator (torch.manual_seed
    repeats it); the backward uses the forward's seed, not a new draw."""
    shape, p = (1, 2, 2, 6, 8, 8, 8), 0.4
    (q, k, v), dout, _ = make(shape, torch.float32)

    def run(seed):
        for t in (q, k, v):
            t.grad = None
        out = vt.scaled_dot_product_attention(q, k, v, dropout_p=p, dropout_seed=seed,
                                              ctx=ctx)
        torch.rand(5)  # the generator moves on before the backward
        out.backward(dout)
        return [out.detach()] + [t.grad.clone() for t in (q, k, v)]
    torch.manual_seed(11)
    a = run(None)
    torch.manual_seed(11)
    b = run(None)
    torch.manual_seed(11)
    drawn = vt._draw_seed()
    c = run(drawn)
    d = run(drawn + 1)
    for x, y, z in zip(a, b, c):
        assert torch.equal(x, y) and torch.equal(x, z)  # the same bits every run
    assert not torch.equal(a[0], d[0])
    keep = _keep_for(drawn, (1, 2, 6, 8), p)
    leaves = [t.detach().double() for t in (q, k, v)]
    assert rel(a[0], formula(*leaves, keep=keep, dropout_p=p)) <= TOL[torch.float32]


# ------------------------------------------------------------------ others
def test_unbatched_and_no_grad(ctx):
    (q, k, v), _, _ = make((1, 2, 2, 5, 7, 8, 8), torch.float32)
    batched = vt.scaled_dot_product_attention(q, k, v, is_causal=True, ctx=ctx)
    one = vt.scaled_dot_product_attention(q[0], k[0], v[0], is_causal=True, ctx=ctx)
    assert one.shape == (2, 5, 8) and torch.equal(one, batched[0])
    with torch.no_grad():
        out = vt.scaled_dot_product_attention(q, k, v, is_causal=True, ctx=ctx)
    assert not out.requires_grad and torch.equal(out, batched)


def test_head_dims_not_quads(ctx):
    """The device's backward takes head dims in quads; reference=True any."""
    (q, k, v), dout, _ = make((1, 2, 2, 3, 4, 6, 6), torch.float32)
    with pytest.raises(vkattn.InvalidInput, match="multiples of 4"):
        vt.scaled_dot_product_attention(q, k, v, ctx=ctx)
    out = vt.scaled_dot_product_attention(q, k, v, ctx=ctx, reference=True)
    out.backward(dout)
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    want = formula(*leaves)
    want.backward(dout.double())
    assert rel(q.grad, leaves[0].grad) < 2e-6


def test_errors(ctx):
    (q, k, v), _, _ = make((1, 4, 2, 3, 5, 8, 8), torch.float32)
    sdpa = vt.scaled_dot_product_attention

    def refused(match, *args, **kw):
        with pytest.raises(vkattn.InvalidInput, match=match):
            sdpa(*args, ctx=ctx, **kw)
    refused("enable_gqa=True", q, k, v)
    refused("dropout_p 1", q, k, v, enable_gqa=True, dropout_p=1.0)
    refused("dtypes", q, k.double(), v, enable_gqa=True)
    refused("dtype torch.int32", q.int(), k.int(), v.int(), enable_gqa=True)
    refused("ranks", q[None], k, v, enable_gqa=True)
    refused("does not broadcast", q, k, v, enable_gqa=True, attn_mask=torch.ones(3, 4) > 0)
    refused("requires grad", q, k, v, enable_gqa=True,
            attn_mask=torch.zeros(3, 5, requires_grad=True))
    refused("key_padding_mask: shape", q, k, v, enable_gqa=True,
            key_padding_mask=torch.zeros(5, dtype=torch.bool))
    refused("sinks: shape", q, k, v, enable_gqa=True, sinks=torch.zeros(2))
    refused("causal_align", q, k, v, enable_gqa=True, is_causal=True, causal_align="middle")
    refused("dropout_seed", q, k, v, enable_gqa=True, dropout_p=0.1, dropout_seed=-1)
    refused("not a multiple", q[:, :3], k, v, enable_gqa=True)
    refused("a torch.Tensor", q.detach().numpy(), k, v, enable_gqa=True)
    with pytest.raises(vkattn.Error):  # the library's own check: softcap must be >= 0
        sdpa(q, k, v, enable_gqa=True, softcap=-1.0, ctx=ctx)


def test_import_vkattn_does_not_import_torch():
    code = "import sys, vkattn; assert 'torch' not in sys.modules, 'torch imported'"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
