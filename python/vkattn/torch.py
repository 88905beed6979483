"""vkattn.torch: torch.nn.functional.scaled_dot_product_attention on vkattn,
with autograd.

    import vkattn.torch
    out = vkattn.torch.scaled_dot_product_attention(q, k, v, is_causal=True)
    out.sum().backward()            # q.grad, k.grad, v.grad

    mha = vkattn.torch.MultiheadAttention(512, 8, batch_first=True)   # torch's signature
    y, _ = mha(x, x, x)             # trains with any torch optimizer (_torch_train.py)

torch CPU tensors in and out. float32, float16 and bfloat16 run on the
device in that dtype (vkattn_attention, then vkattn_attention_backward);
float64, or reference=True, runs on the CPU reference (vkattn_ref_attention
and vkattn_ref_attention_backward: double accumulation, inputs rounded to
f32 first, as the reference takes no f64). The forward keeps out and the
LSE for the backward, which the device's kernels read (FlashAttention-2);
gradients are computed in f32 and returned in the inputs' dtype.

torch is imported here, when `import vkattn.torch` runs: `import vkattn`
never imports it."""
import ctypes

import numpy as np
import torch
from torch.autograd.function import once_differentiable

from . import _arrays as A
from . import _lib
from ._context import _DeviceBackend, default_context
from ._errors import bad, check
from .reference import _HostBackend

L = _lib.lib

# torch dtype -> vkattn dtype of q, k, v, out on the device
_DEVICE_DTYPES = {torch.float32: _lib.DTYPE_F32, torch.float16: _lib.DTYPE_F16,
                  torch.bfloat16: _lib.DTYPE_BF16}
_ALIGN = {"top_left": _lib.CAUSAL_TOP_LEFT, "bottom_right": _lib.CAUSAL_BOTTOM_RIGHT}


class _Spec:
    """Everything of a call but q, k, v and sinks (the differentiable inputs)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False, *, softcap=0.0,
                                 window=0, sinks=None, alibi_slopes=None, key_padding_mask=None,
                                 dropout_seed=None, causal_align="top_left", reference=False,
                                 ctx=None):
    """torch's scaled_dot_product_attention (same positional arguments and
    meanings), differentiable in query, key, value and sinks.

    query [B, Hq, L, Ek], key [B, Hkv, S, Ek], value [B, Hkv, S, Ev] (or all
    rank 3, [H, L, E]); out [B, Hq, L, Ev] in query's dtype. Hq != Hkv needs
    enable_gqa=True and Hq % Hkv == 0 (head h reads KV head h // (Hq // Hkv),
    torch's repeat_interleave). On the device, a backward needs Ek and Ev
    multiples of 4.
      attn_mask      bool (True = attend, as torch's) or float (added to the
                     scores), broadcastable to [B, Hq, L, S]; no gradient
      is_causal      key j visible to query i iff j <= i (top-left, torch's);
                     causal_align="bottom_right": j <= i + S - L (a KV cache's).
                     The alignment also places queries for window and ALiBi
      scale          None: 1 / sqrt(Ek)
      dropout_p      in [0, 1): dropout of the probabilities, applied whenever
                     it is > 0 (pass 0 in eval, as torch's modules do). The
                     mask is a function of dropout_seed (an int in [0, 2^64);
                     None: drawn with torch.randint, so torch.manual_seed makes
                     it repeat) and (b, h, i, j): vkattn_dropout_bits; the
                     backward regenerates the same mask
      softcap        > 0: scores become softcap * tanh(score / softcap) (Gemma 2)
      window         > 0: key j visible iff |i - j| < window (and causal's rule)
      sinks          [Hq] logits joining each row's softmax denominator
                     (gpt-oss); a tensor requiring grad gets its gradient
      alibi_slopes   [Hq]: the score gets -slope_h * |i - j| (no gradient)
      key_padding_mask [B, S] bool, True = ignore (nn.MultiheadAttention's)
      reference      True: the CPU reference whatever the dtype
      ctx            the vkattn.Context (None: vkattn.default_context())
    Rows with no visible key give zeros (and zero gradients), never NaN."""
    q, k, v = (_tensor(t, n) for t, n in ((query, "query"), (key, "key"), (value, "value")))
    if not q.dim() == k.dim() == v.dim() or q.dim() not in (3, 4):
        raise bad("query, key, value: ranks %d, %d, %d; expected all 4 ([B, H, L, E]) or all 3 "
                  "([H, L, E])" % (q.dim(), k.dim(), v.dim()))
    unbatched = q.dim() == 3
    if unbatched:
        q, k, v = q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0)
    if not q.dtype == k.dtype == v.dtype:
        raise bad("query, key, value: dtypes %s, %s, %s; they must be the same (as torch's)"
                  % (q.dtype, k.dtype, v.dtype))
    if q.dtype != torch.float64 and q.dtype not in _DEVICE_DTYPES:
        raise bad("query: dtype %s; vkattn.torch takes float32, float16, bfloat16 (the device) "
                  "or float64 (the CPU reference)" % q.dtype)
    B, Hq, Tq, Dk = q.shape
    Bk, Hkv, Tk, Dk2 = k.shape
    if v.shape[0] != Bk or v.shape[1] != Hkv or v.shape[2] != Tk:
        raise bad("value: shape %s; it must be key's %s but for the last dimension"
                  % (tuple(v.shape), tuple(k.shape)))
    if Bk != B or Dk2 != Dk:
        raise bad("query %s, key %s: batch and head dimension must agree"
                  % (tuple(q.shape), tuple(k.shape)))
    if Hq != Hkv and not enable_gqa:
        raise bad("query has %d heads, key and value %d: pass enable_gqa=True (torch's rule)"
                  % (Hq, Hkv))
    if Hq % Hkv:
        raise bad("query has %d heads, key and value %d: %d is not a multiple of %d"
                  % (Hq, Hkv, Hq, Hkv))
    if causal_align not in _ALIGN:
        raise bad("causal_align %r: 'top_left' (torch's is_causal) or 'bottom_right'"
                  % (causal_align,))
    dropout_p = float(dropout_p)
    if not 0.0 <= dropout_p < 1.0:
        raise bad("dropout_p %g: it must be in [0, 1) (1 would drop everything)" % dropout_p)
    seed = 0
    if dropout_p > 0.0:
        seed = _draw_seed() if dropout_seed is None else _seed(dropout_seed)
    grad = torch.is_grad_enabled()
    for name, t in (("attn_mask", attn_mask), ("alibi_slopes", alibi_slopes),
                    ("key_padding_mask", key_padding_mask)):
        if grad and isinstance(t, torch.Tensor) and t.requires_grad:
            raise bad("%s requires grad: vkattn.torch gives no gradient for it (detach it)"
                      % name)
    use_ref = bool(reference) or q.dtype == torch.float64
    if use_ref:
        code = _DEVICE_DTYPES.get(q.dtype, _lib.DTYPE_F32)
        context = None
    else:
        code = _DEVICE_DTYPES[q.dtype]
        context = default_context() if ctx is None else ctx
        needs = grad and (q.requires_grad or k.requires_grad or v.requires_grad or
                          (isinstance(sinks, torch.Tensor) and sinks.requires_grad))
        if needs and (Dk % 4 or v.shape[3] % 4):
            raise bad("head dims Ek %d, Ev %d: the device's backward reads rows as quads, so "
                      "both must be multiples of 4 (reference=True takes any)"
                      % (Dk, v.shape[3]))
    spec = _Spec(reference=use_ref, ctx=context, code=code,
                 mask=_mask(attn_mask, (B, Hq, Tq, Tk), unbatched),
                 pad=_padding(key_padding_mask, B, Tk), causal=bool(is_causal),
                 align=_ALIGN[causal_align], scale=0.0 if scale is None else float(scale),
                 window=A.u32("window", window), softcap=float(softcap),
                 alibi=None if alibi_slopes is None else _vector(alibi_slopes, "alibi_slopes",
                                                                 Hq),
                 dropout_p=dropout_p, seed=seed)
    if sinks is not None:
        sinks = _vector(sinks, "sinks", Hq)
    out = _Attention.apply(spec, q, k, v, sinks)
    return out[0] if unbatched else out


def _tensor(x, name):
    if not isinstance(x, torch.Tensor):
        raise bad("%s: a torch.Tensor is expected, not %s" % (name, type(x).__name__))
    if x.device.type != "cpu":
        raise bad("%s: on %s; vkattn.torch takes CPU tensors (vkattn reads host memory)"
                  % (name, x.device))
    return x


def _mask(mask, full, unbatched):
    """attn_mask as rank 4, torch's broadcast rule (right-aligned)."""
    if mask is None:
        return None
    m = _tensor(mask, "attn_mask").detach()
    if m.dtype != torch.bool and not m.dtype.is_floating_point:
        raise bad("attn_mask: dtype %s; bool (True = attend) or float (additive)" % m.dtype)
    shape = tuple(m.shape)
    if unbatched and len(shape) == 4:
        raise bad("attn_mask: rank 4 with rank-3 query, key and value")
    if len(shape) > 4 or len(shape) < 1:
        raise bad("attn_mask: rank %d; at most 4, broadcastable to %s" % (len(shape), full))
    shape = (1,) * (4 - len(shape)) + shape
    for n, f in zip(shape, full):
        if n not in (1, f):
            raise bad("attn_mask: shape %s does not broadcast to [B, Hq, L, S] = %s"
                      % (tuple(m.shape), list(full)))
    return m.reshape(shape)


def _padding(kpm, B, Tk):
    if kpm is None:
        return None
    m = _tensor(kpm, "key_padding_mask").detach()
    if tuple(m.shape) != (B, Tk):
        raise bad("key_padding_mask: shape %s; expected [B, S] = [%d, %d] (True = ignore)"
                  % (tuple(m.shape), B, Tk))
    return A.padding_u8(None, m)


def _vector(x, name, n):
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x, dtype=np.float32))
    _tensor(t, name)
    if tuple(t.shape) != (n,) or not t.dtype.is_floating_point:
        raise bad("%s: shape %s, dtype %s; expected floats [Hq] = [%d]"
                  % (name, tuple(t.shape), t.dtype, n))
    return t


def _seed(s):
    s = int(s)
    if not 0 <= s < 1 << 64:
        raise bad("dropout_seed %d: outside [0, 2^64)" % s)
    return s


def _draw_seed():
    """A 64-bit dropout seed from torch's default generator."""
    lo, hi = (int(w) for w in torch.randint(0, 1 << 32, (2,), dtype=torch.int64))
    return lo | hi << 32


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(fctx, spec, q, k, v, sinks):
        out, lse = _forward(spec, q, k, v, sinks)
        fctx.spec = spec
        fctx.save_for_backward(q, k, v, sinks, out, lse)
        return out

    @staticmethod
    @once_differentiable
    def backward(fctx, dout):
        q, k, v, sinks, out, lse = fctx.saved_tensors
        want_dsinks = sinks is not None and fctx.needs_input_grad[4]
        dq, dk, dv, dsinks = _backward(fctx.spec, q, k, v, sinks, out, lse, dout, want_dsinks)
        return None, dq, dk, dv, dsinks


def _backend(spec):
    return _HostBackend() if spec.reference else _DeviceBackend(spec.ctx)


def _forward_args(backend, spec, args, q, k, v, sinks):
    """The forward's inputs and options into `args` (vkattn_attention_args or
    vkattn_ref_attention_args)."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        setattr(args, name, backend.input(name, x, spec.code, ranks=(4,)))
    if spec.mask is not None:
        args.mask = backend.input("attn_mask", spec.mask, None, ranks=(4,), kind="mask")
    if spec.pad is not None:
        args.key_padding = backend.input("key_padding_mask", spec.pad, _lib.DTYPE_U8,
                                         ranks=(2,))
    if sinks is not None:
        args.sinks = backend.input("sinks", sinks, _lib.DTYPE_F32, ranks=(1,))
    if spec.alibi is not None:
        args.alibi_slopes = backend.input("alibi_slopes", spec.alibi, _lib.DTYPE_F32,
                                          ranks=(1,))
    args.causal = spec.causal
    args.causal_align = spec.align
    args.scale = spec.scale
    args.bool_mask = _lib.BOOL_MASK_TRUE_ATTENDS
    args.window = spec.window
    args.softcap = spec.softcap
    args.dropout_p = spec.dropout_p
    args.dropout_seed = spec.seed
    return args


def _run(spec, fn, args):
    if spec.reference:
        err = ctypes.create_string_buffer(512)
        check(getattr(L, "vkattn_ref_" + fn)(ctypes.byref(args), err, len(err)),
              err.value.decode(errors="replace"))
    else:
        spec.ctx._check(getattr(L, "vkattn_" + fn)(spec.ctx._h(), ctypes.byref(args)))


def _to_torch(a, dtype):
    return torch.from_numpy(np.ascontiguousarray(a)).to(dtype)


def _forward(spec, q, k, v, sinks):
    B, Hq, Tq, _ = q.shape
    backend = _backend(spec)
    try:
        args = _forward_args(backend, spec, backend.args(), q, k, v, sinks)
        args.out, fetch_out = backend.output("out", [B, Hq, Tq, v.shape[3]], spec.code)
        args.lse, fetch_lse = backend.output("lse", [B, Hq, Tq], _lib.DTYPE_F32)
        _run(spec, "attention", args)
        return _to_torch(fetch_out(), q.dtype), _to_torch(fetch_lse(), torch.float32)
    finally:
        backend.release()


def _backward(spec, q, k, v, sinks, out, lse, dout, want_dsinks):
    backend = _backend(spec)
    try:
        a = _lib.RefAttentionBackwardArgs() if spec.reference else _lib.AttentionBackwardArgs()
        f = _forward_args(backend, spec, backend.args(), q, k, v, sinks)
        f.out = backend.input("out", out, spec.code, ranks=(4,))
        f.lse = backend.input("lse", lse, _lib.DTYPE_F32, ranks=(3,))
        a.forward = f
        a.dout = backend.input("dout", dout, spec.code, ranks=(4,))
        # the gradients in f32, whatever the inputs' dtype: rounded once, at the end
        a.dq, fetch_dq = backend.output("dq", list(q.shape), _lib.DTYPE_F32)
        a.dk, fetch_dk = backend.output("dk", list(k.shape), _lib.DTYPE_F32)
        a.dv, fetch_dv = backend.output("dv", list(v.shape), _lib.DTYPE_F32)
        fetch_ds = None
        if want_dsinks:
            a.dsinks, fetch_ds = backend.output("dsinks", [q.shape[1]], _lib.DTYPE_F32)
        _run(spec, "attention_backward", a)
        dq, dk, dv = (_to_torch(fetch(), t.dtype)
                      for fetch, t in ((fetch_dq, q), (fetch_dk, k), (fetch_dv, v)))
        ds = _to_torch(fetch_ds(), sinks.dtype) if fetch_ds else None
        return dq, dk, dv, ds
    finally:
        backend.release()


def dropout_keep(seed, shape, dropout_p):
    """The keep mask a call with this seed and dropout_p draws, as a bool
    numpy array of `shape` [B, Hq, L, S]: vkattn_dropout_bits(seed, b, h, i, j)
    >= vkattn_dropout_threshold(dropout_p). One C call per element: for
    small shapes (tests, inspection)."""
    seed = _seed(seed)
    threshold = L.vkattn_dropout_threshold(float(dropout_p))
    bits = np.empty(shape, dtype=np.uint32)
    for idx in np.ndindex(*shape):
        bits[idx] = L.vkattn_dropout_bits(seed, *idx)
    return bits >= threshold


# the layer with autograd (imported last: it uses _draw_seed above)
from ._torch_train import MultiheadAttention  # noqa: E402

__all__ = ["scaled_dot_product_attention", "dropout_keep", "MultiheadAttention"]
