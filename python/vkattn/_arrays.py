"""numpy conversions and the operands of a call (host arrays or device tensors)."""
import ctypes

import numpy as np

from . import _lib
from ._errors import bad

DTYPES = {"f32": _lib.DTYPE_F32, "f16": _lib.DTYPE_F16, "bf16": _lib.DTYPE_BF16,
          "u8": _lib.DTYPE_U8, "i32": _lib.DTYPE_I32}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
# numpy storage of each dtype (bf16: the uint16 bits)
STORAGE = {_lib.DTYPE_F32: np.float32, _lib.DTYPE_F16: np.float16, _lib.DTYPE_BF16: np.uint16,
           _lib.DTYPE_U8: np.uint8, _lib.DTYPE_I32: np.int32}
FLOATS = (_lib.DTYPE_F32, _lib.DTYPE_F16, _lib.DTYPE_BF16)


def dtype_code(dtype, allowed=FLOATS):
    """"f32", "f16", "bf16" (or numpy dtypes float32/float16) -> vkattn_dtype."""
    if isinstance(dtype, str) and dtype in DTYPES:
        code = DTYPES[dtype]
    else:
        try:
            npd = np.dtype(dtype)
        except TypeError:
            raise bad("dtype %r: use 'f32', 'f16' or 'bf16'" % (dtype,)) from None
        code = {np.dtype(np.float32): _lib.DTYPE_F32,
                np.dtype(np.float16): _lib.DTYPE_F16}.get(npd)
        if code is None:
            raise bad("dtype %r: use 'f32', 'f16' or 'bf16'" % (dtype,))
    if code not in allowed:
        raise bad("dtype %r is not allowed here (use one of %s)"
                  % (dtype, ", ".join(DTYPE_NAMES[c] for c in allowed)))
    return code


def as_numpy(x, name="array"):
    """Anything with __array__ (numpy arrays, lists, PyTorch CPU tensors)."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch: no grad, host, no bf16
        x = x.detach().cpu()
        if str(getattr(x, "dtype", "")) == "torch.bfloat16":
            x = x.float()
    try:
        a = np.asarray(x)
    except Exception as e:  # noqa: BLE001 - anything the object raises
        raise bad("%s: cannot be read as an array (%s)" % (name, e)) from None
    if a.dtype == object:
        raise bad("%s: not a numeric array" % name)
    return a


def f32_to_bf16_bits(a):
    """Round to nearest even, as vkattn_f32_to_bf16 does; NaN stays quiet NaN."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        rounded[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def bf16_bits_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def to_storage(a, code, name="array"):
    """A C-contiguous array holding `a` in the storage of vkattn dtype `code`."""
    if code == _lib.DTYPE_BF16:
        return f32_to_bf16_bits(a)
    if a.dtype.kind not in "fiub":
        raise bad("%s: dtype %s is not numeric" % (name, a.dtype))
    return np.ascontiguousarray(a, dtype=STORAGE[code])


def from_storage(a, code):
    """What the user gets back: bf16 bits become float32."""
    return bf16_bits_to_f32(a) if code == _lib.DTYPE_BF16 else a


def check_rank(shape, name, ranks):
    if len(shape) not in ranks:
        raise bad("%s: rank %d (shape %s); expected rank %s"
                  % (name, len(shape), tuple(shape), " or ".join(str(r) for r in ranks)))


def element_strides(a):
    """numpy byte strides -> element strides (non-negative, whole elements)."""
    out = []
    for s in a.strides:
        if s < 0 or s % a.itemsize:
            raise bad("array with negative or misaligned strides")
        out.append(s // a.itemsize)
    return out


def fill(struct, shape, strides, code):
    """Shape, strides, dtype and rank of a vkattn_tensor / vkattn_host_tensor."""
    if len(shape) > _lib.MAX_RANK:
        raise bad("rank %d is over %d" % (len(shape), _lib.MAX_RANK))
    struct.dtype = code
    struct.rank = len(shape)
    for i, (n, s) in enumerate(zip(shape, strides)):
        struct.shape[i] = int(n)
        struct.strides[i] = int(s)


def mask_code(a, name="mask"):
    """A mask's dtype: bool/uint8 -> u8 (boolean), float16 -> f16, other floats -> f32."""
    if a.dtype == np.bool_ or a.dtype == np.uint8:
        return _lib.DTYPE_U8
    if a.dtype == np.float16:
        return _lib.DTYPE_F16
    if a.dtype.kind == "f":
        return _lib.DTYPE_F32
    raise bad("%s: dtype %s; use bool or uint8 (boolean) or a float dtype (additive)"
              % (name, a.dtype))


def padding_u8(key_padding, key_padding_mask):
    """vkattn's key_padding (1 = token) from either convention."""
    if key_padding is not None and key_padding_mask is not None:
        raise bad("give key_padding (1 = token) or key_padding_mask (True = ignore), not both")
    if key_padding is not None:
        a = as_numpy(key_padding, "key_padding")
        return np.ascontiguousarray(a != 0, dtype=np.uint8)
    if key_padding_mask is not None:
        a = as_numpy(key_padding_mask, "key_padding_mask")
        return np.ascontiguousarray(a == 0, dtype=np.uint8)
    return None


def u32(name, value):
    """An integer for a uint32_t field, refused (not wrapped) outside 0..2^32-1."""
    v = int(value)
    if v < 0 or v >= 1 << 32:
        raise bad("%s %d: out of range (0..4294967295)" % (name, v))
    return v


def u32_array(values):
    arr = (ctypes.c_uint32 * len(values))(*values)
    return arr
