"""The CPU reference (vkattn_ref_*): double accumulation, no Vulkan device.

reference.attention takes the same arguments as Context.attention;
reference.mha computes a whole MultiheadAttention layer from a state dict."""
import ctypes

import numpy as np

from . import _arrays as A
from . import _attention
from . import _lib
from ._errors import check

L = _lib.lib


class _HostBackend:
    def __init__(self):
        self.keep = []

    def args(self):
        return _lib.RefAttentionArgs()

    @staticmethod
    def is_device_tensor(x):
        return False

    def _host(self, a, shape, strides, code):
        self.keep.append(a)
        t = _lib.HostTensor()
        t.data = a.ctypes.data
        A.fill(t, shape, strides, code)
        return t

    def input(self, name, x, code, ranks, perm=None, kind=None):
        a, shape, strides, code = _attention.host_operand(name, x, code, ranks, perm, kind)
        return self._host(a, shape, strides, code)

    def output(self, name, shape, code, perm=None):
        user_shape = shape if perm is None else [shape[p] for p in perm]
        a = np.zeros(user_shape, dtype=A.STORAGE[code])
        sh, st = _attention.permute(a.shape, A.element_strides(a), perm)
        return self._host(a, sh, st, code), lambda: A.from_storage(a, code)

    def run(self, args):
        err = ctypes.create_string_buffer(512)
        r = L.vkattn_ref_attention(ctypes.byref(args), err, len(err))
        check(r, err.value.decode(errors="replace"))

    def release(self):
        self.keep = []


def attention(q, k, v, **kw):
    """vkattn_ref_attention with Context.attention's arguments and results
    (see its docstring); f16/bf16 inputs are rounded to that dtype first."""
    return _attention.attention(_HostBackend(), q, k, v, **kw)


def mha(x, state_dict, *, embed_dim, num_heads, num_kv_heads=None, head_dim=None, kdim=None,
        bias=True, scale=None, window=0, softcap=0.0, kv=None, causal=False, mask=None,
        key_padding=None, key_padding_mask=None, need_weights=False, mask_true_blocks=True,
        causal_top_left=False, positions=None, head_mask=None, value=None, **options):
    """vkattn_ref_mha: the layer of vkattn.MultiheadAttention (same
    constructor keywords and state-dict names) on the CPU, all f32.
    x [B, Tq, embed_dim]; kv [B, Tk, kdim] (None: self-attention); value
    [B, Tk, vdim] (None: the values from kv, or x; vdim= as the layer's).
    Returns y [B, Tq, embed_dim], or (y, weights [B, Tq, Tk]) with need_weights."""
    from ._mha import LayerSpec
    spec = LayerSpec(embed_dim, num_heads, num_kv_heads, head_dim, kdim, bias, "f32", scale,
                     window, softcap, **options)
    weights = spec.parse_state_dict(state_dict)
    return ref_layer(spec, weights, x, kv, causal, mask, key_padding, key_padding_mask,
                     need_weights, mask_true_blocks, causal_top_left, positions, head_mask,
                     value)


def ref_layer(spec, weights, x, kv, causal, mask, key_padding, key_padding_mask, need_weights,
              mask_true_blocks, causal_top_left, positions=None, head_mask=None, value=None,
              packed=None):
    keep = []

    def host(name, a, code, ranks):
        a = A.as_numpy(a, name)
        A.check_rank(a.shape, name, ranks)
        if code is None:
            code = A.mask_code(a, name)
            if a.dtype == np.bool_:
                a = a.astype(np.uint8)
        a = A.to_storage(a, code, name)
        keep.append(a)
        t = _lib.HostTensor()
        t.data = a.ctypes.data
        A.fill(t, a.shape, A.element_strides(a), code)
        return t, a

    args = _lib.RefMhaArgs()
    args.x, xa = host("x", x, _lib.DTYPE_F32, (3,))
    B, Tq = xa.shape[0], xa.shape[1]
    Tk = Tq
    if kv is not None:
        args.kv, kva = host("kv", kv, _lib.DTYPE_F32, (3,))
        Tk = kva.shape[1]
    if value is not None:
        args.value, _ = host("value", value, _lib.DTYPE_F32, (3,))
    y = np.zeros((B, Tq, spec.desc.embed_dim), dtype=np.float32)
    args.y, _ = host("y", y, _lib.DTYPE_F32, (3,))
    y = keep[-1]
    if mask is not None:
        args.mask, _ = host("mask", mask, None, (2, 3, 4))
    pad = A.padding_u8(key_padding, key_padding_mask)
    if pad is not None:
        args.key_padding, _ = host("key_padding", pad, _lib.DTYPE_U8, (2,))
    w = None
    if need_weights:
        w = np.zeros((B, Tq, Tk + spec.appended_rows()), dtype=np.float32)
        args.weights, _ = host("weights", w, _lib.DTYPE_F32, (3,))
        w = keep[-1]
    if positions is not None:
        args.positions, _ = host("positions", positions, _lib.DTYPE_I32, (2,))
    if head_mask is not None:
        args.head_mask, _ = host("head_mask", head_mask, _lib.DTYPE_F32, (1, 2))
    args.causal = bool(causal)
    args.bool_mask = _lib.BOOL_MASK_TRUE_BLOCKS if mask_true_blocks else \
        _lib.BOOL_MASK_TRUE_ATTENDS
    args.causal_align = _lib.CAUSAL_TOP_LEFT if causal_top_left else _lib.CAUSAL_BOTTOM_RIGHT
    if packed is not None:  # (q offsets, k offsets or None), int32
        args.sequences = len(packed[0]) - 1
        args.q_offsets = packed[0].ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
        if packed[1] is not None:
            args.k_offsets = packed[1].ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
    desc = spec.ref_desc()
    cw = spec.c_weights(weights, _lib.DTYPE_F32)
    err = ctypes.create_string_buffer(512)
    r = L.vkattn_ref_mha(ctypes.byref(desc), ctypes.byref(cw), ctypes.byref(args), err, len(err))
    check(r, err.value.decode(errors="replace"))
    return (y, w) if need_weights else y


__all__ = ["attention", "mha"]
