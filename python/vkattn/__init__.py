"""vkattn: multi-head attention as Vulkan compute shaders, from Python.

    import numpy as np, vkattn
    with vkattn.Context() as ctx:
        out = ctx.attention(q, k, v, causal=True)   # q [B, Hq, Tq, D], k/v [B, Hkv, Tk, D]

A pure-Python package (ctypes) over the shared library libvkattn.so; numpy
arrays in and out, anything with __array__ (PyTorch CPU tensors) accepted.
`import vkattn.torch` adds scaled_dot_product_attention with autograd
(torch is imported then, never by `import vkattn` itself).
See python/README.md and the C manual in include/vkattn.h."""
from . import _lib
from ._errors import Error, InvalidInput
from ._context import Context, Tensor, default_context, devices
from ._mha import KVCache, MultiheadAttention, kv_cache_bytes, param_count
from . import reference
from . import safetensors
from . import viz

__all__ = ["Context", "Tensor", "default_context", "devices", "MultiheadAttention", "KVCache", "Error",
           "InvalidInput", "reference", "safetensors", "version", "library_path", "param_count",
           "kv_cache_bytes", "viz"]


def version():
    """The linked library's version, "major.minor.patch"."""
    return _lib.lib.vkattn_version_string().decode()


library_path = _lib.lib.path
__version__ = version()
