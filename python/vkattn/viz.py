"""Pictures of attention weights (PNG or SVG) through libvkattn_viz.

    out, w = ctx.attention(q, k, v, causal=True, need_weights=True, per_head=True)
    vkattn.viz.save(w, "weights.png", tokens=words, title="layer 3")

One heatmap per head in a grid (queries down, keys across), viridis colours
from 0 to the largest weight shown with a scale bar; cells marked in
`hidden` (keys a query cannot see: causal, masks, padding) are drawn grey,
not as weight 0. The picture is written whole or not at all.

libvkattn_viz.so is a small C library beside libvkattn.so (built with the
tools; it needs cairo, not Vulkan); it is loaded on the first save, from the
directory libvkattn was loaded from, or from $VKATTN_VIZ_LIBRARY."""
import ctypes
import os

import numpy as np

from . import _lib
from ._errors import Error, InvalidInput

__all__ = ["save"]

_u32, _bool, _int = ctypes.c_uint32, ctypes.c_bool, ctypes.c_int
_SUCCESS, _ARGUMENT, _VALUE, _FORMAT = 0, -1, -2, -3


class VizDesc(ctypes.Structure):
    """vkattn_viz_desc of tools/viz/viz.h, field by field."""
    _fields_ = [
        ("weights", ctypes.POINTER(ctypes.c_float)),
        ("heads", _u32), ("q_len", _u32), ("k_len", _u32),
        ("hidden", ctypes.POINTER(_bool)),
        ("hidden_heads", _u32),
        ("q_tokens", ctypes.POINTER(ctypes.c_char_p)),
        ("k_tokens", ctypes.POINTER(ctypes.c_char_p)),
        ("title", ctypes.c_char_p),
        ("average", _bool), ("pre_averaged", _bool),
        ("reduce", _int), ("scale", _int),
        ("max_cells", _u32), ("max_pixels", _u32),
    ]


_loaded = []  # the library once found (no other state)


def _candidates():
    env = os.environ.get("VKATTN_VIZ_LIBRARY")
    if env:
        yield env
    here = os.path.dirname(getattr(_lib.lib, "path", "") or "")
    for name in ("libvkattn_viz.so.0", "libvkattn_viz.so"):
        yield os.path.join(here, name) if here else name


def _library():
    if _loaded:
        return _loaded[0]
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        lib.vkattn_viz_write.restype = _int
        lib.vkattn_viz_write.argtypes = [ctypes.POINTER(VizDesc), ctypes.c_char_p,
                                         ctypes.c_char_p, ctypes.c_size_t]
        lib.vkattn_viz_result_name.restype = ctypes.c_char_p
        lib.vkattn_viz_result_name.argtypes = [_int]
        lib.path = path
        _loaded.append(lib)
        return lib
    raise Error("vkattn.viz: cannot find libvkattn_viz.so beside libvkattn (it is built with "
                "the tools and needs cairo: Debian's libcairo2-dev; or set VKATTN_VIZ_LIBRARY "
                "to its path); tried: " + "; ".join(tried), 0, "VKATTN_VIZ_NOT_FOUND")


def _tokens(tokens, n, name):
    if tokens is None:
        return None
    tokens = list(tokens)
    if len(tokens) != n:
        raise InvalidInput("vkattn.viz.save: %s has %d entries, expected %d"
                           % (name, len(tokens), n))
    return (ctypes.c_char_p * n)(*[str(t).encode("utf-8", "replace") for t in tokens])


def save(weights, path, tokens=None, key_tokens=None, average=False, title=None, hidden=None):
    """Draws attention weights into `path` (.png or .svg).

    weights: float [H, Tq, Tk] (one tile per head), [Tq, Tk] (already
    averaged over heads), or [B, H, Tq, Tk] (batch row 0 is drawn); finite,
    >= 0. tokens: Tq labels of the queries (and of the keys when Tq == Tk);
    key_tokens: Tk labels of the keys. average: one heatmap of the mean over
    heads. hidden: bool, True where a key is hidden from a query, [Tq, Tk]
    for every head, [H, Tq, Tk], or [B, H, Tq, Tk] (row 0)."""
    w = np.asarray(weights, dtype=np.float32)
    if w.ndim == 4:
        w = w[0]
    if w.ndim not in (2, 3) or 0 in w.shape:
        raise InvalidInput("vkattn.viz.save: weights shaped %s, expected [H, Tq, Tk], [Tq, Tk] "
                           "or [B, H, Tq, Tk]" % (tuple(np.shape(weights)),))
    pre_averaged = w.ndim == 2
    w = np.ascontiguousarray(w.reshape((-1,) + w.shape[-2:]))
    heads, tq, tk = w.shape
    hid = None
    if hidden is not None:
        hid = np.asarray(hidden, dtype=np.bool_)
        if hid.ndim == 4:
            hid = hid[0]
        if hid.ndim == 2:
            hid = hid[None]
        if hid.ndim != 3 or hid.shape[1:] != (tq, tk) or hid.shape[0] not in (1, heads):
            raise InvalidInput("vkattn.viz.save: hidden shaped %s does not fit weights [%d, %d, "
                               "%d]" % (tuple(np.shape(hidden)), heads, tq, tk))
        hid = np.ascontiguousarray(hid)
    q_tok = _tokens(tokens, tq, "tokens")
    k_tok = _tokens(key_tokens, tk, "key_tokens")
    desc = VizDesc(
        weights=w.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
        heads=heads, q_len=tq, k_len=tk,
        hidden=hid.ctypes.data_as(ctypes.POINTER(_bool)) if hid is not None else None,
        hidden_heads=hid.shape[0] if hid is not None else 0,
        q_tokens=q_tok, k_tokens=k_tok,
        title=title.encode("utf-8", "replace") if title is not None else None,
        average=bool(average), pre_averaged=pre_averaged)
    lib = _library()
    err = ctypes.create_string_buffer(1024)
    code = lib.vkattn_viz_write(ctypes.byref(desc), os.fsencode(os.fspath(path)), err,
                                ctypes.sizeof(err))
    if code != _SUCCESS:
        name = lib.vkattn_viz_result_name(code).decode()
        message = "%s: %s" % (name, err.value.decode("utf-8", "replace"))
        cls = InvalidInput if code in (_ARGUMENT, _VALUE, _FORMAT) else Error
        raise cls(message, code, name)
