"""vkattn.MultiheadAttention in torch.nn.MultiheadAttention's own signature:
the drop-in form, chosen when the first argument is not a Context."""
import numpy as np

from . import _arrays as A
from ._errors import bad

_DTYPES = {None: "f32", "float32": "f32", "float16": "f16", "bfloat16": "bf16",
           "f32": "f32", "f16": "f16", "bf16": "bf16"}


def _dtype_name(dtype):
    """torch.float16, np.float16, "f16", ... as vkattn's names."""
    key = None if dtype is None else str(dtype).replace("torch.", "")
    if key not in _DTYPES:
        try:
            key = np.dtype(dtype).name
        except TypeError:
            pass
    if key not in _DTYPES:
        raise bad("dtype %r: use float32, float16 or bfloat16" % (dtype,))
    return _DTYPES[key]


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def _as_torch_like(a, like):
    """`a` (numpy) as `like`'s kind: a torch tensor for torch inputs."""
    if a is None or not _is_torch(like):
        return a
    import torch
    return torch.from_numpy(np.ascontiguousarray(a))


def torch_forward(layer, query, key, value, key_padding_mask, need_weights, attn_mask,
                  average_attn_weights, is_causal):
    """torch.nn.MultiheadAttention.forward's semantics over `layer`."""
    if layer.training and layer.dropout > 0.0:
        raise bad("dropout %g in training mode: this drop-in layer has no autograd; train "
                  "with vkattn.torch.MultiheadAttention (which applies dropout), or call "
                  ".eval() (dropout is then ignored, as torch does)" % layer.dropout)
    like = query
    q = A.as_numpy(query, "query")
    k = A.as_numpy(key, "key")
    v = A.as_numpy(value, "value")
    unbatched = q.ndim == 2
    if unbatched:  # [L, E]: one sequence
        q, k, v = q[None], k[None], v[None]
        if key_padding_mask is not None:
            key_padding_mask = A.as_numpy(key_padding_mask, "key_padding_mask")[None]
    elif not layer.batch_first:  # [L, B, E] -> [B, L, E]
        q, k, v = (np.swapaxes(t, 0, 1) for t in (q, k, v))
    for name, t in (("query", q), ("key", k), ("value", v)):
        if t.ndim != 3:
            raise bad("%s has %d dimensions: [L, E] unbatched, or %s batched"
                      % (name, t.ndim - (1 if unbatched else 0),
                         "[B, L, E]" if layer.batch_first else "[L, B, E]"))
    self_attention = key is query and value is query
    mask = None if attn_mask is None else A.as_numpy(attn_mask, "attn_mask")
    kpm = None if key_padding_mask is None else A.as_numpy(key_padding_mask, "key_padding_mask")
    padding = None
    if kpm is not None:
        if kpm.dtype == np.bool_ or np.all((kpm == 0) | np.isneginf(kpm)):
            padding = np.ascontiguousarray(kpm == 0, dtype=np.uint8)  # 1 = token
        else:  # a float mask with other values: added to the scores, as torch does
            extra = kpm.astype(np.float32)[:, None, None, :]
            base = 0.0 if mask is None else _additive(mask, q.shape[0], layer.num_heads)
            mask = base + extra
    causal = bool(is_causal) and mask is None  # with a mask, is_causal is torch's hint
    kv = None if self_attention else k
    val = None if self_attention or value is key else v
    out = layer._run(q, kv, val, causal, None, need_weights, mask, padding, True, causal,
                     None, None, per_head=not average_attn_weights)
    y, w = (out if need_weights else (out, None))
    if unbatched:
        y = y[0]
        w = None if w is None else w[0]
    elif not layer.batch_first:
        y = np.swapaxes(y, 0, 1)
    return _as_torch_like(y, like), _as_torch_like(w, like)


def _additive(mask, batch, heads):
    """A torch attn_mask (bool True = hidden, or float) as f32 [B, H, L, S]
    or a shape that broadcasts to it."""
    m = np.where(mask, -np.inf, 0.0).astype(np.float32) if mask.dtype == np.bool_ \
        else mask.astype(np.float32)
    if m.ndim == 3:  # [B*H, L, S]
        m = m.reshape(batch, heads, m.shape[1], m.shape[2])
    return m
