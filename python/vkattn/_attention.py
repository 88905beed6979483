"""The argument handling of attention, shared by the device and the CPU reference.

A backend turns operands into the C structs: the device uploads host arrays
into buffers (device tensors are used as they are), the reference points
vkattn_host_tensor at the numpy arrays."""
import ctypes

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
              return_lse=False, layout="bhtd", head_mask=None, cu_seqlens=None,
              cu_seqlens_k=None):
    try:
        return _attention(backend, q, k, v, causal, mask, key_padding, key_padding_mask, scale,
                          dtype, need_weights, per_head, causal_top_left, window, softcap, sinks,
                          alibi_slopes, alibi_max_bias, mask_true_blocks, return_lse, layout,
                          head_mask, cu_seqlens, cu_seqlens_k)
    finally:
        backend.release()


def _attention(backend, q, k, v, causal, mask, key_padding, key_padding_mask, scale, dtype,
               need_weights, per_head, causal_top_left, window, softcap, sinks, alibi_slopes,
               alibi_max_bias, mask_true_blocks, return_lse, layout, head_mask, cu_seqlens,
               cu_seqlens_k):
    code = A.dtype_code(dtype)
    perm = layout_perm(layout)
    # the offsets are read during the call only: these locals outlive it
    packed = packed_offsets(cu_seqlens, cu_seqlens_k)
    if packed is not None:
        refuse_unpacked(mask=mask, key_padding=key_padding, key_padding_mask=key_padding_mask,
                        need_weights=need_weights or None)
    args = backend.args()
    # q, k, v: [B, H, T, D] seen through the layout; q may be [H, T, D]
    # (one query for every batch row of k and v, as SDPA broadcasts it);
    # packed, any of them may be [H, T, D], the one batch row left out
    shapes = {}
    q_rank = rank_of(q)
    for name, x in (("q", q), ("k", k), ("v", v)):
        three = rank_of(x) == 3 and (name == "q" or packed is not None)
        t = backend.input(name, x, code, ranks=(3, 4) if name == "q" or packed else (4,),
                          perm=(None if perm is None else (1, 0, 2)) if three else perm)
        if three and packed is not None:
            batch_of_one(t)
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
    if packed is not None:
        args.sequences = len(packed[0]) - 1
        args.q_offsets = packed[0].ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
        if packed[1] is not None:
            args.k_offsets = packed[1].ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
    backend.run(args)
    results = [fetch() for _, fetch in outputs]
    if packed is not None and q_rank == 3:  # FlashAttention's [total, H, D] in, so out
        results = [r[0] for r in results]
    return results[0] if len(results) == 1 else tuple(results)


def rank_of(x):
    shape = getattr(x, "shape", None)
    return len(shape) if shape is not None else np.ndim(x)


def batch_of_one(t):
    """A rank-3 tensor struct [H, T, D] as [1, H, T, D]."""
    shape, strides = list(t.shape)[:3], list(t.strides)[:3]
    A.fill(t, [1] + shape, [int(np.prod(shape))] + strides, t.dtype)


def offsets_i32(name, x):
    """cu_seqlens as the C library takes it: a contiguous int32 array."""
    a = A.as_numpy(x, name)
    if a.ndim != 1:
        raise bad("%s: rank %d (shape %s); expected a 1-D array of B + 1 offsets"
                  % (name, a.ndim, a.shape))
    if a.size < 2:
        raise bad("%s %s: %d offsets; B >= 1 sequences take B + 1 (0, then where each ends)"
                  % (name, np.array2string(a), a.size))
    if a.dtype.kind not in "iu":
        raise bad("%s %s: dtype %s; offsets are integers"
                  % (name, np.array2string(a, threshold=8), a.dtype))
    out = (a < np.iinfo(np.int32).min) | (a > np.iinfo(np.int32).max)
    if out.any():
        i = int(np.argmax(out))
        raise bad("%s[%d] = %d: outside int32" % (name, i, int(a[i])))
    return np.ascontiguousarray(a, dtype=np.int32)


def packed_offsets(cu_seqlens, cu_seqlens_k):
    """(q offsets, k offsets or None) as int32 arrays, or None: not packed."""
    if cu_seqlens is None:
        if cu_seqlens_k is not None:
            raise bad("cu_seqlens_k is given without cu_seqlens (the queries' offsets)")
        return None
    qo = offsets_i32("cu_seqlens", cu_seqlens)
    if cu_seqlens_k is None:
        return qo, None
    ko = offsets_i32("cu_seqlens_k", cu_seqlens_k)
    if len(ko) != len(qo):
        raise bad("cu_seqlens_k has %d offsets and cu_seqlens %d: both are B + 1 long"
                  % (len(ko), len(qo)))
    return qo, ko


def refuse_unpacked(**given):
    """What a packed call cannot take (as the library refuses, but named in
    this module's words and before anything is allocated)."""
    for name, value in given.items():
        if value is not None:
            raise bad("%s is given with cu_seqlens: packed sequences take no %s (its shape has "
                      "no packed form; causal, window and the other modifiers apply per "
                      "sequence)" % (name, name))


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
