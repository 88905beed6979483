"""The argument handling of attention, shared by the device and the CPU reference.

A backend turns operands into the C structs: the device uploads host arrays
into buffers (device tensors are used as they are), the reference points
vkattn_host_tensor at the numpy arrays."""
import numpy as np

from . import _arrays as A
from . import _lib
from ._errors import bad

BTHD = (0, 2, 1, 3)  # [B, T, H, D] <-> [B, H, T, D]


def layout_perm(layout):
    if layout in ("bhtd", None):
        return None
    if layout == "bthd":
        return BTHD
    raise bad("layout %r: use 'bhtd' ([B, H, T, D]) or 'bthd' ([B, T, H, D])" % (layout,))


def permute(shape, strides, perm):
    if perm is None:
        return list(shape), list(strides)
    return [shape[p] for p in perm], [strides[p] for p in perm]


def attention(backend, q, k, v, *, causal=False, mask=None, key_padding=None,
              key_padding_mask=None, scale=None, dtype="f32", need_weights=False,
              per_head=False, causal_top_left=False, window=0, softcap=0.0, sinks=None,
              alibi_slopes=None, alibi_max_bias=0.0, mask_true_blocks=False,
              return_lse=False, layout="bhtd", head_mask=None):
    try:
        return _attention(backend, q, k, v, causal, mask, key_padding, key_padding_mask, scale,
                          dtype, need_weights, per_head, causal_top_left, window, softcap, sinks,
                          alibi_slopes, alibi_max_bias, mask_true_blocks, return_lse, layout,
                          head_mask)
    finally:
        backend.release()


def _attention(backend, q, k, v, causal, mask, key_padding, key_padding_mask, scale, dtype,
               need_weights, per_head, causal_top_left, window, softcap, sinks, alibi_slopes,
               alibi_max_bias, mask_true_blocks, return_lse, layout, head_mask):
    code = A.dtype_code(dtype)
    perm = layout_perm(layout)
    args = backend.args()
    # q, k, v: [B, H, T, D] seen through the layout; q may be [H, T, D]
    # (one query for every batch row of k and v, as SDPA broadcasts it)
    shapes = {}
    q_rank = len(getattr(q, "shape", ()))
    for name, x in (("q", q), ("k", k), ("v", v)):
        three = name == "q" and q_rank == 3
        t = backend.input(name, x, code, ranks=(3, 4) if name == "q" else (4,),
                          perm=(None if perm is None else (1, 0, 2)) if three else perm)
        setattr(args, name, t)
        shapes[name] = list(t.shape)[:t.rank]
    B = shapes["k"][0]
    Hq, Tq = shapes["q"][-3], shapes["q"][-2]
    Tk, Dv = shapes["k"][2], shapes["v"][3]
    out_code = args.q.dtype
    outputs = [backend.output("out", [B, Hq, Tq, Dv], out_code, perm=perm)]
    args.out = outputs[0][0]
    if mask is not None:
        args.mask = backend.input("mask", mask, None, ranks=(2, 3, 4), kind="mask")
    pad = A.padding_u8(key_padding, key_padding_mask) if not backend.is_device_tensor(
        key_padding) else None
    if pad is not None:
        args.key_padding = backend.input("key_padding", pad, _lib.DTYPE_U8, ranks=(2,))
    elif key_padding is not None:
        args.key_padding = backend.input("key_padding", key_padding, _lib.DTYPE_U8, ranks=(2,))
    if need_weights:
        wshape = [B, Hq, Tq, Tk] if per_head else [B, Tq, Tk]
        outputs.append(backend.output("weights", wshape, _lib.DTYPE_F32))
        args.weights = outputs[-1][0]
    if return_lse:
        outputs.append(backend.output("lse", [B, Hq, Tq], _lib.DTYPE_F32))
        args.lse = outputs[-1][0]
    if sinks is not None:
        args.sinks = backend.input("sinks", sinks, _lib.DTYPE_F32, ranks=(1,))
    if alibi_slopes is not None:
        args.alibi_slopes = backend.input("alibi_slopes", alibi_slopes, _lib.DTYPE_F32,
                                          ranks=(1,))
    if head_mask is not None:
        args.head_mask = backend.input("head_mask", head_mask, _lib.DTYPE_F32, ranks=(1, 2))
    args.causal = bool(causal)
    args.scale = 0.0 if scale is None else float(scale)
    args.bool_mask = _lib.BOOL_MASK_TRUE_BLOCKS if mask_true_blocks else \
        _lib.BOOL_MASK_TRUE_ATTENDS
    args.causal_align = _lib.CAUSAL_TOP_LEFT if causal_top_left else _lib.CAUSAL_BOTTOM_RIGHT
    args.window = A.u32("window", window)
    args.softcap = float(softcap)
    args.alibi_max_bias = float(alibi_max_bias)
    backend.run(args)
    results = [fetch() for _, fetch in outputs]
    return results[0] if len(results) == 1 else tuple(results)


def host_operand(name, x, code, ranks, perm=None, kind=None):
    """(storage array, shape, strides, code) of a host input in vkattn's view."""
    a = A.as_numpy(x, name)
    A.check_rank(a.shape, name, ranks)
    if kind == "mask":
        code = A.mask_code(a, name)
        if a.dtype == np.bool_:
            a = a.astype(np.uint8)
    a = A.to_storage(a, code, name)
    shape, strides = permute(a.shape, A.element_strides(a), perm)
    return a, shape, strides, code
