"""vkattn.torch.MultiheadAttention, the trainable layer: its gradients (f32,
the device) against torch.nn.MultiheadAttention's in float64 with the same
weights, gradcheck through the CPU reference (float64), dropout (the same
seed, the same output; the device's gradients against the reference's), and
the acceptance loop: 200 AdamW steps of a one-layer model on vkattn and on
torch from the same weights, the losses within 1e-3 at every step. Skipped
where torch is not installed."""
import time

import pytest

torch = pytest.importorskip("torch")

import vkattn  # noqa: E402
import vkattn.torch as vt  # noqa: E402

TOL = 2e-4  # max abs error / max abs value, f32 device vs float64 torch


def rel(got, want):
    got, want = got.detach().double(), want.detach().double()
    assert got.shape == want.shape, (got.shape, want.shape)
    assert torch.isfinite(got).all()
    return float((got - want).abs().max() / max(float(want.abs().max()), 1e-30))


def pair(ctx, E, H, seed=0, **kw):
    """(vkattn module f32, torch module float64) with the same weights; the
    biases random too (torch starts them at zero)."""
    torch.manual_seed(seed)
    ref = torch.nn.MultiheadAttention(E, H, **kw).double()
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    mine = vt.MultiheadAttention(E, H, ctx=ctx, **kw)
    mine.load_state_dict({k: v.float() for k, v in ref.state_dict().items()})
    return mine, ref


def _causal(L, S):
    return torch.ones(L, S, dtype=torch.bool).triu(1)  # True = not allowed (torch's)


def _kpm(B, S):
    m = torch.zeros(B, S, dtype=torch.bool)
    m[0, -3:] = True
    m[-1, 1] = True
    return m


# name, module keywords, (B, L, S), inputs: "self" (one tensor), "kv" (key
# is value) or "cross",
# forward keywords from (B, L, S, H)
CASES = [
    ("self_bias", {}, (3, 7, 7), "self", lambda B, L, S, H: {}),
    ("self_no_bias", {"bias": False}, (3, 7, 7), "self", lambda B, L, S, H: {}),
    ("batch_first", {"batch_first": True}, (3, 7, 7), "self", lambda B, L, S, H: {}),
    ("causal_mask", {}, (2, 9, 9), "self",
     lambda B, L, S, H: {"attn_mask": _causal(L, S)}),
    ("float_mask_3d", {}, (2, 6, 6), "self",
     lambda B, L, S, H: {"attn_mask": torch.randn(B * H, L, S)}),
    ("key_padding", {"batch_first": True}, (3, 8, 8), "self",
     lambda B, L, S, H: {"key_padding_mask": _kpm(B, S)}),
    ("causal_and_padding", {}, (3, 8, 8), "self",
     lambda B, L, S, H: {"attn_mask": _causal(L, S), "key_padding_mask": _kpm(B, S)}),
    ("cross", {}, (2, 5, 11), "cross", lambda B, L, S, H: {"key_padding_mask": _kpm(B, S)}),
    ("cross_key_is_value", {"batch_first": True}, (2, 5, 9), "kv", lambda B, L, S, H: {}),
    ("cross_key_is_value_kdim", {"kdim": 12, "vdim": 12}, (2, 5, 9), "kv",
     lambda B, L, S, H: {}),
    ("cross_kdim_vdim", {"kdim": 12, "vdim": 20}, (2, 5, 11), "cross", lambda B, L, S, H: {}),
    ("cross_kdim", {"kdim": 12, "vdim": 12, "bias": False}, (2, 6, 4), "cross",
     lambda B, L, S, H: {"attn_mask": _causal(6, 4)}),
]


def _inputs(mod, B, L, S, kind, g):
    E, first = mod.embed_dim, mod.batch_first

    def rnd(T, F):
        shape = (B, T, F) if first else (T, B, F)
        return torch.randn(*shape, generator=g, dtype=torch.float64)
    if kind == "self":
        return [rnd(L, E)]
    if kind == "kv":  # key and value one tensor: kv given, value not
        return [rnd(L, E), rnd(S, mod.kdim)]
    return [rnd(L, E), rnd(S, mod.kdim), rnd(S, mod.vdim)]


def _grads(mod, inputs, kw, dout):
    leaves = [t.clone().requires_grad_() for t in inputs]
    q, k, v = (leaves * 3 if len(leaves) == 1 else
               leaves + leaves[1:] if len(leaves) == 2 else leaves)
    kw = {n: m.to(q.dtype) if m.is_floating_point() else m for n, m in kw.items()}
    out, w = mod(q, k, v, need_weights=False, **kw)
    assert w is None
    out.backward(dout.to(out.dtype))
    grads = {"in%d" % i: t.grad for i, t in enumerate(leaves)}
    grads.update({n: p.grad for n, p in mod.named_parameters()})
    return out, grads


@pytest.mark.parametrize("name,mkw,sizes,kind,fkw", CASES, ids=[c[0] for c in CASES])
def test_gradients_match_torch_float64(ctx, name, mkw, sizes, kind, fkw):
    E, H = 16, 4
    mine, ref = pair(ctx, E, H, **mkw)
    B, L, S = sizes
    g = torch.Generator().manual_seed(1)
    inputs = _inputs(mine, B, L, S, kind, g)
    kw = fkw(B, L, S, H)
    dout = torch.randn(*((B, L, E) if mine.batch_first else (L, B, E)), generator=g,
                       dtype=torch.float64)
    ref_out, ref_g = _grads(ref, inputs, kw, dout)
    out, got = _grads(mine, [t.float() for t in inputs], kw, dout)
    assert out.dtype == torch.float32
    errs = {"out": rel(out, ref_out)}
    assert set(got) == set(ref_g)
    for n in ref_g:
        assert got[n].dtype == torch.float32, n
        errs[n] = rel(got[n], ref_g[n])
    print("%s: %s" % (name, " ".join("%s %.1e" % kv for kv in errs.items())))
    over = {n: e for n, e in errs.items() if e > TOL}
    assert not over, "max abs error / max abs value over %g: %s" % (TOL, over)


def test_unbatched_and_need_weights_in_eval(ctx):
    mine, ref = pair(ctx, 16, 4)
    mine.eval()
    ref.eval()
    x = torch.randn(5, 16, dtype=torch.float64)
    for avg in (True, False):
        y, w = mine(x.float(), x.float(), x.float(), need_weights=True,
                    average_attn_weights=avg)
        ry, rw = ref(x, x, x, need_weights=True, average_attn_weights=avg)
        assert y.shape == ry.shape and w.shape == rw.shape
        assert rel(y, ry) < TOL and rel(w, rw) < TOL


def test_gqa_runs_and_learns(ctx):
    """num_kv_heads: vkattn's extra; the gradients against the reference path."""
    torch.manual_seed(3)
    mod = vt.MultiheadAttention(16, 4, num_kv_heads=2, batch_first=True, ctx=ctx)
    assert mod.in_proj_weight.shape == (16 + 2 * 8, 16)
    refm = vt.MultiheadAttention(16, 4, num_kv_heads=2, batch_first=True, reference=True)
    refm.load_state_dict(mod.state_dict())
    x = torch.randn(2, 6, 16)
    outs = []
    for m in (mod, refm):
        xi = x.clone().requires_grad_()
        y, _ = m(xi, xi, xi, attn_mask=_causal(6, 6))
        y.square().sum().backward()
        outs.append((y, xi.grad, m.in_proj_weight.grad, m.out_proj.weight.grad))
    for a, b in zip(*outs):
        assert rel(a, b) < TOL


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_half_precision_modules(ctx, dtype):
    """float16 / bfloat16 modules run the layer in that dtype (gradients
    computed in f32, returned in the parameters' dtype); head dim 8, as a
    bf16 layer's output needs."""
    mine, ref = pair(ctx, 32, 4)
    mine.to(dtype)
    x = torch.randn(6, 2, 32, dtype=torch.float64)
    res = []
    for m, dt in ((mine, dtype), (ref, torch.float64)):
        xi = x.to(dt).requires_grad_()
        y, _ = m(xi, xi, xi)
        y.double().square().sum().backward()
        res.append([y, xi.grad, m.in_proj_weight.grad, m.out_proj.weight.grad])
    assert all(t.dtype == dtype for t in res[0])
    errs = [rel(a, b) for a, b in zip(*res)]
    assert max(errs) < 2e-2, errs


def _functional(mod):
    names = [n for n, _ in mod.named_parameters()]
    try:
        from torch.func import functional_call
    except ImportError:
        from torch.nn.utils.stateless import functional_call

    def f(x, *params):
        y, _ = functional_call(mod, dict(zip(names, params)), (x, x, x))
        return y
    return f, [p.detach().clone().requires_grad_() for p in mod.parameters()]


# float64 gradcheck through the reference (inputs rounded to f32: eps 1e-3)
GRADCHECK = dict(eps=1e-3, atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("kw", [{}, {"bias": False, "batch_first": True}],
                         ids=["bias", "no_bias"])
def test_reference_gradcheck(kw):
    torch.manual_seed(0)
    mod = vt.MultiheadAttention(8, 2, dtype=torch.float64, **kw)
    f, params = _functional(mod)
    x = torch.randn(3, 2, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(f, (x, *params), **GRADCHECK)


def test_reference_gradcheck_with_dropout():
    """A fixed seed (torch.manual_seed before each call) fixes the mask."""
    torch.manual_seed(0)
    mod = vt.MultiheadAttention(8, 2, dropout=0.3, dtype=torch.float64)
    f, params = _functional(mod)

    def g(*a):
        torch.manual_seed(11)
        return f(*a)
    x = torch.randn(4, 1, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(g, (x, *params), **GRADCHECK)


# ------------------------------------------------------------------ dropout
def test_dropout_same_seed_same_output(ctx):
    torch.manual_seed(0)
    mod = vt.MultiheadAttention(16, 4, dropout=0.25, batch_first=True, ctx=ctx)
    x = torch.randn(2, 8, 16)
    torch.manual_seed(7)
    a, _ = mod(x, x, x)
    torch.manual_seed(7)
    b, _ = mod(x, x, x)
    c, _ = mod(x, x, x)  # the next seed: another mask
    assert torch.equal(a, b)
    assert not torch.allclose(a, c)
    mod.eval()  # no dropout: torch's layer's output
    ref = torch.nn.MultiheadAttention(16, 4, batch_first=True).double()
    ref.load_state_dict({k: v.double() for k, v in mod.state_dict().items()})
    ref.eval()
    assert rel(mod(x, x, x)[0], ref(*(x.double(),) * 3)[0]) < TOL
    mod.train()
    with pytest.raises(vkattn.InvalidInput, match="need_weights"):
        mod(x, x, x, need_weights=True)


@pytest.mark.parametrize("mask", [False, True], ids=["plain", "causal_padding"])
def test_dropout_gradients_match_reference(ctx, mask):
    """The device (f32) and the CPU reference with the same seed: the same
    mask, so the same outputs and gradients to f32 rounding."""
    torch.manual_seed(0)
    dev = vt.MultiheadAttention(16, 4, dropout=0.3, ctx=ctx)
    ref = vt.MultiheadAttention(16, 4, dropout=0.3, dtype=torch.float64)
    with torch.no_grad():
        dev.in_proj_bias.normal_(0, 0.3)
        dev.out_proj.bias.normal_(0, 0.3)
    ref.load_state_dict({k: v.double() for k, v in dev.state_dict().items()})
    x = torch.randn(7, 3, 16, dtype=torch.float64)
    kw = {"attn_mask": _causal(7, 7), "key_padding_mask": _kpm(3, 7)} if mask else {}
    res = []
    for m, dt in ((dev, torch.float32), (ref, torch.float64)):
        xi = x.to(dt).requires_grad_()
        torch.manual_seed(42)
        y, _ = m(xi, xi, xi, **kw)
        y.backward(torch.cos(torch.arange(y.numel(), dtype=dt)).reshape(y.shape))
        res.append([y, xi.grad] + [p.grad for p in m.parameters()])
    errs = [rel(a, b) for a, b in zip(*res)]
    assert max(errs) < TOL, errs
    # and the mask matters: without dropout the output differs
    dev.eval()
    assert rel(dev(x.float(), x.float(), x.float(), **kw)[0], res[1][0]) > 1e-2


# ------------------------------------------------------ the 200-step loop
# lr 5e-3: at 1e-2 the model fits the random target so far (loss 0.94 ->
# 0.009) that the trajectory turns sensitive after ~100 steps, and torch's
# own float32 run then drifts 1.5e-3 from its float64 one (vkattn's alike);
# at 5e-3 both stay within 5e-5 of float64 while the loss falls 47-fold.
LR = 5e-3


def _train(mod, x, y, steps, dtype):
    opt = torch.optim.AdamW(mod.parameters(), lr=LR)
    x, y = x.to(dtype), y.to(dtype)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        out, _ = mod(x, x, x)
        loss = torch.nn.functional.mse_loss(out, y)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses


def test_adamw_200_steps_match_torch(ctx):
    """The issue's acceptance: a one-layer model (MHA E=32, 4 heads, then MSE
    to a fixed random target), AdamW lr 5e-3, 200 steps, on vkattn (f32, the
    device) and on torch (float64) from the same initial weights: the losses
    agree within 1e-3 at every step and fall substantially. torch's float32
    run is printed beside it for scale."""
    torch.manual_seed(0)
    B, L, E, H = 4, 16, 32, 4
    x = torch.randn(B, L, E)
    y = torch.randn(B, L, E)
    ref = torch.nn.MultiheadAttention(E, H, batch_first=True).double()
    with torch.no_grad():
        ref.in_proj_bias.normal_(0, 0.1)
    mine = vt.MultiheadAttention(E, H, batch_first=True, ctx=ctx)
    mine.load_state_dict({k: v.float() for k, v in ref.state_dict().items()})
    t0 = time.perf_counter()
    got = _train(mine, x, y, 200, torch.float32)
    t1 = time.perf_counter()
    t32 = torch.nn.MultiheadAttention(E, H, batch_first=True)
    t32.load_state_dict({k: v.float() for k, v in ref.state_dict().items()})
    want = _train(ref, x, y, 200, torch.float64)
    t2 = time.perf_counter()
    torch32 = _train(t32, x, y, 200, torch.float32)
    diff = [abs(a - b) for a, b in zip(got, want)]
    worst = max(range(len(diff)), key=diff.__getitem__)
    print("200 AdamW steps: vkattn loss %.6f -> %.6f (%.2f s), torch float64 %.6f -> %.6f "
          "(%.2f s); max |difference| %.2e at step %d (torch float32's: %.2e)"
          % (got[0], got[-1], t1 - t0, want[0], want[-1], t2 - t1, diff[worst], worst,
             max(abs(a - b) for a, b in zip(torch32, want))))
    assert diff[worst] <= 1e-3, (worst, got[worst], want[worst])
    assert got[-1] < 0.7 * got[0]
