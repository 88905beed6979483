"""vkattn.MultiheadAttention (vkattn_mha) and its KV cache (vkattn_kv_cache)."""
import ctypes

import numpy as np

from . import _arrays as A
from . import _lib
from ._context import Context, Tensor, default_context
from ._attention import packed_offsets, refuse_unpacked
from ._errors import Error, bad

L = _lib.lib

# state-dict names -> the weight they are (HF names and PyTorch's; both may
# appear with or without a prefix)
_NAMES = {
    "q_proj.weight": "wq", "k_proj.weight": "wk", "v_proj.weight": "wv",
    "q_proj.bias": "bq", "k_proj.bias": "bk", "v_proj.bias": "bv",
    "o_proj.weight": "wo", "o_proj.bias": "bo",
    "out_proj.weight": "wo", "out_proj.bias": "bo",
    "q_proj_weight": "wq", "k_proj_weight": "wk", "v_proj_weight": "wv",
    "in_proj_weight": "wqkv", "in_proj_bias": "bqkv",
    "q_norm.weight": "q_norm", "k_norm.weight": "k_norm",
    "sinks": "sinks", "alibi_slopes": "alibi_slopes",
    "bias_k": "bias_k", "bias_v": "bias_v",
}
_ROPE_STYLES = {"neox": 0, "gptj": 1}
_ROPE_SCALINGS = {None: 0, "default": 0, "linear": 1, "llama3": 2}


_WEIGHT_DTYPES = {None: _lib.DTYPE_F32, "f32": _lib.DTYPE_F32, "f16": _lib.DTYPE_F16,
                  "bf16": _lib.DTYPE_BF16, "q8_0": _lib.DTYPE_Q8_0}
_CACHE_DTYPES = {"f32": _lib.DTYPE_F32, "f16": _lib.DTYPE_F16, "bf16": _lib.DTYPE_BF16,
                 "q8_0": _lib.DTYPE_Q8_0, "q4_0": _lib.DTYPE_Q4_0, "q4_1": _lib.DTYPE_Q4_1,
                 "q5_0": _lib.DTYPE_Q5_0, "q5_1": _lib.DTYPE_Q5_1, "iq4_nl": _lib.DTYPE_IQ4_NL}
_CACHE_DTYPE_NAMES = ", ".join("'%s'" % k for k in _CACHE_DTYPES)


def _weight_dtype_code(name):
    """weight_dtype: None (the layer's dtype), "f16", "bf16" or "q8_0"."""
    if name not in _WEIGHT_DTYPES:
        raise bad("weight_dtype %r: use None (the layer's dtype), 'f16', 'bf16' or 'q8_0'"
                  % (name,))
    return _WEIGHT_DTYPES[name]


class LayerSpec:
    """The layer's configuration (a vkattn_mha_desc) and its state-dict rules."""

    def __init__(self, embed_dim, num_heads, num_kv_heads=None, head_dim=None, kdim=None,
                 bias=True, dtype="f32", scale=None, window=0, softcap=0.0, rope_theta=0.0,
                 rope_dims=0, rope_style="neox", rope_scaling=None, qk_norm=False, norm_eps=0.0,
                 sinks=False, alibi=False, alibi_max_bias=0.0, weight_dtype=None,
                 v_head_dim=None, vdim=None, add_bias_kv=False, add_zero_attn=False):
        for name, val in (("embed_dim", embed_dim), ("num_heads", num_heads)):
            if int(val) <= 0:
                raise bad("%s %d: must be > 0" % (name, int(val)))
        Hq = A.u32("num_heads", num_heads)
        Hkv = Hq if num_kv_heads is None else A.u32("num_kv_heads", num_kv_heads)
        if Hkv <= 0 or Hq % Hkv:
            raise bad("num_kv_heads %d does not divide num_heads %d" % (Hkv, Hq))
        Dm = A.u32("embed_dim", embed_dim)
        if head_dim is None:
            if Dm % Hq:
                raise bad("embed_dim %d is not a multiple of num_heads %d (give head_dim)"
                          % (Dm, Hq))
            Dh = Dm // Hq
        else:
            Dh = A.u32("head_dim", head_dim)
        d = _lib.MhaDesc()
        d.embed_dim, d.num_heads, d.num_kv_heads, d.head_dim = Dm, Hq, Hkv, Dh
        d.v_head_dim = Dh if v_head_dim is None else A.u32("v_head_dim", v_head_dim)
        d.kv_dim = Dm if kdim is None else A.u32("kdim", kdim)
        d.value_dim = d.kv_dim if vdim is None else A.u32("vdim", vdim)
        d.bias = bool(bias)
        d.dtype = A.dtype_code(dtype)
        d.scale = 0.0 if scale is None else float(scale)
        d.window = A.u32("window", window)
        d.softcap = float(softcap)
        d.rope.theta = float(rope_theta)
        d.rope.dims = A.u32("rope_dims", rope_dims)
        if rope_style not in _ROPE_STYLES:
            raise bad("rope_style %r: use 'neox' (rotate_half) or 'gptj' (interleaved)"
                      % (rope_style,))
        d.rope.style = _ROPE_STYLES[rope_style]
        if rope_scaling is not None:  # Hugging Face's rope_scaling dict
            kind = rope_scaling.get("rope_type", rope_scaling.get("type"))
            if kind not in _ROPE_SCALINGS:
                raise bad("rope_scaling type %r: use 'linear' or 'llama3'" % (kind,))
            d.rope.scaling = _ROPE_SCALINGS[kind]
            d.rope.factor = float(rope_scaling.get("factor", 0.0))
            d.rope.low_freq_factor = float(rope_scaling.get("low_freq_factor", 0.0))
            d.rope.high_freq_factor = float(rope_scaling.get("high_freq_factor", 0.0))
            d.rope.original_max_positions = A.u32("original_max_position_embeddings",
                                                  rope_scaling.get(
                                                      "original_max_position_embeddings", 0))
        d.qk_norm = bool(qk_norm)
        d.norm_eps = float(norm_eps)
        d.sinks = bool(sinks)
        d.alibi = bool(alibi or alibi_max_bias)
        d.alibi_max_bias = float(alibi_max_bias)
        d.weight_dtype = _weight_dtype_code(weight_dtype)
        d.add_bias_kv = bool(add_bias_kv)
        d.add_zero_attn = bool(add_zero_attn)
        self.desc = d

    def appended_rows(self):
        """Keys torch's add_bias_kv and add_zero_attn append (0, 1 or 2)."""
        return int(self.desc.add_bias_kv) + int(self.desc.add_zero_attn)

    def sizes(self):
        d = self.desc
        q, k = d.num_heads * d.head_dim, d.num_kv_heads * d.head_dim
        v, o = d.num_kv_heads * d.v_head_dim, d.num_heads * d.v_head_dim
        return {"wq": (q, d.embed_dim), "wk": (k, d.kv_dim), "wv": (v, d.value_dim),
                "wo": (d.embed_dim, o), "bq": (q,), "bk": (k,), "bv": (v,),
                "bo": (d.embed_dim,), "q_norm": (d.head_dim,), "k_norm": (d.head_dim,),
                "sinks": (d.num_heads,), "alibi_slopes": (d.num_heads,),
                "bias_k": (k,), "bias_v": (v,)}

    def parse_state_dict(self, state, prefix=""):
        """{wq, wk, wv, wo, [bq, bk, bv, bo]}: float32 arrays of checked shapes."""
        if not hasattr(state, "items"):
            raise bad("state_dict: a mapping of names to arrays")
        found, unknown = {}, []
        for key, val in state.items():
            if not key.startswith(prefix):
                continue
            name = key[len(prefix):]
            if name not in _NAMES:
                unknown.append(key)
                continue
            a = A.as_numpy(val, key).astype(np.float32)
            if name in ("bias_k", "bias_v"):  # torch's [1, 1, E]: one row
                a = a.reshape(-1)
            found[_NAMES[name]] = (key, a)
        if unknown:
            raise bad("state_dict: unknown names %s (known: %s)"
                      % (", ".join(sorted(unknown)), ", ".join(sorted(_NAMES))))
        d, sizes = self.desc, self.sizes()
        q, kv, v = d.num_heads * d.head_dim, d.num_kv_heads * d.head_dim, \
            d.num_kv_heads * d.v_head_dim
        # the packed projection (torch's in_proj_*) is split by rows
        for packed, parts in (("wqkv", ("wq", "wk", "wv")), ("bqkv", ("bq", "bk", "bv"))):
            if packed not in found:
                continue
            key, a = found.pop(packed)
            if any(p in found for p in parts):
                raise bad("state_dict: %s together with separate q/k/v projections" % key)
            if a.shape[0] != q + kv + v:
                raise bad("state_dict: %s has %d rows; (num_heads + num_kv_heads) * head_dim + "
                          "num_kv_heads * v_head_dim is %d" % (key, a.shape[0], q + kv + v))
            for p, lo, hi in zip(parts, (0, q, q + kv), (q, q + kv, q + kv + v)):
                found[p] = (key, a[lo:hi])
        weights = {}
        for name in ("wq", "wk", "wv", "wo"):
            if name not in found:
                raise bad("state_dict: no %s weight (names: %s)" % (
                    name[1], ", ".join(k for k, v in _NAMES.items() if v in (name, "wqkv"))))
        needed = {"q_norm": d.qk_norm, "k_norm": d.qk_norm, "sinks": d.sinks,
                  "bias_k": d.add_bias_kv, "bias_v": d.add_bias_kv}
        for name, need in needed.items():
            if need and name not in found:
                raise bad("state_dict: no %s (the layer has %s)"
                          % (name, "qk_norm" if "norm" in name else
                             "add_bias_kv" if "bias" in name else "sinks"))
        for name, (key, a) in found.items():
            if name in ("bq", "bk", "bv", "bo") and not d.bias:
                raise bad("state_dict: %s, but the layer has bias=False" % key)
            if name in needed and not needed[name] or name == "alibi_slopes" and not d.alibi:
                flag = {"q_norm": "qk_norm", "k_norm": "qk_norm", "bias_k": "add_bias_kv",
                        "bias_v": "add_bias_kv"}.get(name, name)
                raise bad("state_dict: %s, but the layer was made without %s" % (key, flag))
            if tuple(a.shape) != sizes[name]:
                raise bad("state_dict: %s has shape %s; the layer needs %s"
                          % (key, tuple(a.shape), sizes[name]))
            weights[name] = np.ascontiguousarray(a, dtype=np.float32)
        return weights

    def c_weights(self, weights, dtype):
        w = _lib.MhaWeights()
        for name, a in weights.items():
            setattr(w, name, a.ctypes.data)
        w.dtype = dtype
        w._keep = weights  # the arrays outlive the struct's use
        return w

    def ref_desc(self):
        d = _lib.MhaDesc()
        ctypes.pointer(d)[0] = self.desc
        d.dtype = _lib.DTYPE_F32
        return d


class MultiheadAttention:
    """An attention layer on the device (vkattn_mha): Q/K/V projections,
    attention, output projection, with its weights in device memory.

    MultiheadAttention(ctx, embed_dim, num_heads, num_kv_heads=None, bias=True,
    kdim=None, dtype="f32", head_dim=None, window=0, softcap=0.0, scale=None,
    rope_theta=0.0, rope_dims=0, rope_style="neox", rope_scaling=None (HF's dict),
    qk_norm=False, norm_eps=0.0, sinks=False, alibi=False, alibi_max_bias=0.0,
    weight_dtype=None ("f16", "bf16", "q8_0": the weights' storage on the device),
    v_head_dim=None (V's head dim when it differs from head_dim: DeepSeek's MLA),
    vdim=None (the value input's features when they differ from kdim's, as
    torch's vdim: forward then takes value apart from kv), add_bias_kv=False,
    add_zero_attn=False (torch's: a learned key/value row, then a zero row,
    appended after the projections, visible to every query; weights get
    their columns after the keys'; state dicts carry bias_k and bias_v)):
    modern decoder layers (see include/vkattn/ops.h "MHA layer"); their weights
    come as q_norm.weight, k_norm.weight, sinks, alibi_slopes.
    Weights use torch.nn.Linear's layout; load them with load_state_dict,
    which takes nn.MultiheadAttention's names (in_proj_weight, in_proj_bias,
    q/k/v_proj_weight, out_proj.weight, out_proj.bias) or Hugging Face's
    (q_proj, k_proj, v_proj, o_proj with .weight / .bias).
    Inputs are batch-first, x [B, T, embed_dim] (nn.MultiheadAttention's
    batch_first=True)."""

    def __new__(cls, *args, **kwargs):
        # without a Context first: torch.nn.MultiheadAttention's signature
        if cls is MultiheadAttention and not (args and isinstance(args[0], Context)) and \
                not isinstance(kwargs.get("ctx"), Context):
            return object.__new__(TorchMultiheadAttention)
        return object.__new__(cls)

    def __init__(self, ctx, embed_dim, num_heads, num_kv_heads=None, bias=True, kdim=None,
                 dtype="f32", head_dim=None, window=0, softcap=0.0, scale=None, **options):
        self.ctx = ctx
        self._handle = None
        self.spec = LayerSpec(embed_dim, num_heads, num_kv_heads, head_dim, kdim, bias, dtype,
                              scale, window, softcap, **options)
        self.host_weights = None
        h = ctypes.c_void_p()
        ctx._check(L.vkattn_mha_create(ctx._h(), ctypes.byref(self.spec.desc), ctypes.byref(h)))
        self._handle = h.value
        ctx._register(self)

    @property
    def embed_dim(self):
        return self.spec.desc.embed_dim

    @property
    def dtype(self):
        return A.DTYPE_NAMES[self.spec.desc.dtype]

    def _h(self):
        if not self._handle or self.ctx.closed:
            raise Error("the layer is closed")
        return self._handle

    def close(self):
        if self._handle and not self.ctx.closed:
            L.vkattn_mha_destroy(self._handle)
        self._handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    def load_state_dict(self, state_dict, prefix=""):
        """Uploads the weights of a state dict (arrays or torch tensors);
        keys outside `prefix` are ignored, unknown keys inside it refused."""
        weights = self.spec.parse_state_dict(state_dict, prefix)
        cw = self.spec.c_weights(weights, _lib.DTYPE_F32)
        self.ctx._check(L.vkattn_mha_set_weights(self._h(), ctypes.byref(cw)))
        self.host_weights = weights
        return self

    def load_safetensors(self, path, prefix=""):
        """load_state_dict on the tensors of a .safetensors file whose names
        start with `prefix` (e.g. "model.layers.0.self_attn."): torch's or
        Hugging Face's names as for load_state_dict; F32, F16 and BF16
        tensors. The file is checked as vkattn.safetensors.load says."""
        from . import safetensors
        return self.load_state_dict(safetensors.load(path, prefix), prefix)

    def tune(self, batch, q_len, kv_len=None, progress=None):
        """Measures the kernel choices of this layer's forward at these sizes
        (vkattn_mha_tune: its GEMMs and attention, causal and not); progress:
        an optional callable, as Context.tune_attention's."""
        from . import _tuning
        _tuning.tune_layer(self, batch, q_len, kv_len, progress)

    def tune_step(self, cache, batch, new_tokens, length, progress=None):
        """The same for steps over `cache` (vkattn_mha_step_tune)."""
        from . import _tuning
        _tuning.tune_layer_step(self, cache, batch, new_tokens, length, progress)

    def state_dict(self):
        """The loaded weights under Hugging Face's names (host copies, float32)."""
        names = {"wq": "q_proj.weight", "wk": "k_proj.weight", "wv": "v_proj.weight",
                 "wo": "o_proj.weight", "bq": "q_proj.bias", "bk": "k_proj.bias",
                 "bv": "v_proj.bias", "bo": "o_proj.bias", "q_norm": "q_norm.weight",
                 "k_norm": "k_norm.weight", "sinks": "sinks", "alibi_slopes": "alibi_slopes",
                 "bias_k": "bias_k", "bias_v": "bias_v"}
        return {names[k]: v.copy() for k, v in (self.host_weights or {}).items()}

    # -------------------------------------------------------------- calls
    def _input(self, name, x, keep, ranks=(3,), code=None):
        if isinstance(x, Tensor):
            A.check_rank(x.shape, name, ranks)
            return x._vk(), x.shape
        a = A.as_numpy(x, name)
        A.check_rank(a.shape, name, ranks)
        if code is None:
            code = A.mask_code(a, name) if name == "mask" else self.spec.desc.dtype
            if a.dtype == np.bool_:
                a = a.astype(np.uint8)
        s = A.to_storage(a, code, name)
        buf = self.ctx._buffer(s.nbytes)
        keep.append(buf)
        buf.upload(s)
        t = _lib.Tensor()
        t.buffer = buf.handle
        A.fill(t, s.shape, A.element_strides(s), code)
        return t, s.shape

    def _loaded(self):
        if self.host_weights is None:
            raise Error("load_state_dict first: the layer has no weights")

    def forward(self, x, kv=None, value=None, causal=False, key_padding_mask=None,
                need_weights=False, mask=None, key_padding=None, mask_true_blocks=True,
                causal_top_left=False, positions=None, head_mask=None, cu_seqlens=None,
                cu_seqlens_k=None):
        """y = the layer on x [B, Tq, embed_dim] (kv [B, Tk, kdim]: cross-attention;
        value [B, Tk, vdim]: the values from an input of their own, as torch's
        layer(query, key, value); None: from kv, or x).
        Returns y [B, Tq, embed_dim], or (y, weights [B, Tq, Tk] averaged over
        heads) with need_weights.
        key_padding_mask: torch's convention, True = ignore; key_padding:
        vkattn's, 1 = token. mask: as Context.attention, but a boolean mask
        means True = hidden by default, as nn.MultiheadAttention's attn_mask
        (mask_true_blocks=False: True = attend, as SDPA). positions: int32
        [B, Tq], the RoPE position of each token (default 0..Tq-1).
        head_mask: float32 [num_heads] or [B, num_heads], Hugging Face's:
        head h's attention output of batch row b times head_mask[b, h] before
        the output projection (0 removes the head).
        cu_seqlens: packed ragged sequences (FlashAttention's varlen form): B + 1
        integer offsets, x [1, sum Tq, embed_dim] holding sequence i's tokens
        at [cu_seqlens[i], cu_seqlens[i + 1]) (kv and value [1, sum Tk, ...]
        with cu_seqlens_k; default cu_seqlens); each sequence attends to its
        own keys only, RoPE positions restart at 0 with each (positions
        [1, sum Tq] overrides them); head_mask may be [B, num_heads]; no
        mask, key padding or weights."""
        return self._run(x, kv, value, causal, key_padding_mask, need_weights, mask, key_padding,
                         mask_true_blocks, causal_top_left, positions, head_mask,
                         packed=packed_offsets(cu_seqlens, cu_seqlens_k))

    def head_importance(self, x, kv=None, value=None, causal=False, key_padding_mask=None,
                        mask=None, key_padding=None, mask_true_blocks=True,
                        causal_top_left=False, positions=None):
        """Each head's importance for these inputs (forward's arguments):
        float32 [num_heads], the RMS change of y when that head alone is
        masked, i.e. its share of the output (vkattn_mha_head_importance; runs
        num_heads + 1 forwards). Prune the smallest with prune_heads."""
        imp = np.zeros(self.spec.desc.num_heads, dtype=np.float32)
        self._run(x, kv, value, causal, key_padding_mask, False, mask, key_padding,
                  mask_true_blocks, causal_top_left, positions, None, imp)
        return imp

    def _run(self, x, kv, value, causal, key_padding_mask, need_weights, mask, key_padding,
             mask_true_blocks, causal_top_left, positions, head_mask, importance=None,
             per_head=False, packed=None):
        """forward, or with `importance` (float32 [num_heads]) head_importance;
        packed: (q offsets, k offsets or None) as int32 arrays."""
        self._loaded()
        if packed is not None:
            refuse_unpacked(mask=mask, key_padding=key_padding,
                            key_padding_mask=key_padding_mask,
                            need_weights=True if need_weights else None)
        keep, outs = [], []
        try:
            args = _lib.MhaForwardArgs()
            args.x, xs = self._input("x", x, keep)
            B, Tq = xs[0], xs[1]
            Tk = Tq
            if kv is not None:
                args.kv, ks = self._input("kv", kv, keep)
                Tk = ks[1]
            if value is not None:
                args.value, _ = self._input("value", value, keep)
            y = Tensor(self.ctx, (B, Tq, self.embed_dim), self.spec.desc.dtype)
            outs.append(y)
            args.y = y._vk()
            if mask is not None:
                args.mask, _ = self._input("mask", mask, keep, ranks=(2, 3, 4))
            if isinstance(key_padding, Tensor):
                args.key_padding, _ = self._input("key_padding", key_padding, keep, (2,))
            else:
                pad = A.padding_u8(key_padding, key_padding_mask)
                if pad is not None:
                    args.key_padding, _ = self._input("key_padding", pad, keep, (2,),
                                                      _lib.DTYPE_U8)
            w = None
            if need_weights:  # torch's appended rows have columns after the keys'
                cols = Tk + self.spec.appended_rows()
                shape = (B, self.spec.desc.num_heads, Tq, cols) if per_head else (B, Tq, cols)
                w = Tensor(self.ctx, shape, _lib.DTYPE_F32)
                outs.append(w)
                args.weights = w._vk()
            if positions is not None:
                args.positions, _ = self._input("positions", positions, keep, (2,),
                                                _lib.DTYPE_I32)
            if head_mask is not None:
                args.head_mask, _ = self._input("head_mask", head_mask, keep, (1, 2),
                                                _lib.DTYPE_F32)
            args.causal = bool(causal)
            args.bool_mask = _lib.BOOL_MASK_TRUE_BLOCKS if mask_true_blocks else \
                _lib.BOOL_MASK_TRUE_ATTENDS
            args.causal_align = _lib.CAUSAL_TOP_LEFT if causal_top_left else \
                _lib.CAUSAL_BOTTOM_RIGHT
            if packed is not None:
                args.sequences = len(packed[0]) - 1
                args.q_offsets = packed[0].ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
                if packed[1] is not None:
                    args.k_offsets = packed[1].ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
            if importance is None:
                self.ctx._check(L.vkattn_mha_forward(self._h(), ctypes.byref(args)))
            else:
                self.ctx._check(L.vkattn_mha_head_importance(
                    self._h(), ctypes.byref(args),
                    importance.ctypes.data_as(ctypes.POINTER(ctypes.c_float))))
            res = [t.numpy() for t in outs]
            return tuple(res) if need_weights else res[0]
        finally:
            for b in keep + outs:
                b.close()

    __call__ = forward

    def reference(self, x, kv=None, value=None, causal=False, key_padding_mask=None,
                  need_weights=False, mask=None, key_padding=None, mask_true_blocks=True,
                  causal_top_left=False, positions=None, head_mask=None, cu_seqlens=None,
                  cu_seqlens_k=None):
        """The same forward on the CPU reference (vkattn_ref_mha), in f32."""
        from .reference import ref_layer
        self._loaded()
        packed = packed_offsets(cu_seqlens, cu_seqlens_k)
        if packed is not None:
            refuse_unpacked(mask=mask, key_padding=key_padding,
                            key_padding_mask=key_padding_mask,
                            need_weights=True if need_weights else None)
        return ref_layer(self.spec, self.host_weights, x, kv, causal, mask, key_padding,
                         key_padding_mask, need_weights, mask_true_blocks, causal_top_left,
                         positions, head_mask, value, packed)

    def prune_heads(self, heads):
        """Removes the query heads `heads` (numbers of the current layer, as
        Hugging Face's prune_heads) for good (vkattn_mha_prune_heads): their
        rows of Wq and columns of Wo go, and the KV heads whose whole group
        goes, so the layer gets smaller and faster; its output then equals
        the unpruned layer's with those heads masked. num_heads, num_kv_heads,
        state_dict() and reference() follow the pruned layer (its weights
        read back as the device holds them); KV caches must be made anew.
        Returns the kept heads' old numbers."""
        self._loaded()
        d = self.spec.desc
        drop = sorted({int(h) for h in heads})
        if any(h < 0 or h >= d.num_heads for h in drop):
            raise bad("heads %s: the layer has heads 0..%d" % (list(heads), d.num_heads - 1))
        kept = [h for h in range(d.num_heads) if h not in drop]
        if not drop or not kept:
            raise bad("heads %s: %s" % (list(heads), "names no head" if not drop else
                                          "removes every head: at least one must stay"))
        self.ctx._check(L.vkattn_mha_prune_heads(self._h(), A.u32_array(kept), len(kept)))
        ctypes.pointer(d)[0] = L.vkattn_mha_config(self._h())[0]
        weights = self._device_weights()
        for name in ("sinks", "alibi_slopes"):  # per head: they follow their heads
            if name in self.host_weights:
                weights[name] = np.ascontiguousarray(self.host_weights[name][kept])
        for name in ("q_norm", "k_norm"):
            if name in self.host_weights:
                weights[name] = self.host_weights[name]
        self.host_weights = weights
        return kept

    def _device_weights(self):
        """The projection weights and biases as the device holds them, as
        float32 arrays (vkattn_mha_get_weights; q8_0 dequantized exactly)."""
        d, sizes = self.spec.desc, self.spec.sizes()
        names = ["wq", "wk", "wv", "wo"] + (["bq", "bk", "bv", "bo"] if d.bias else [])
        wt = d.weight_dtype
        held, copy = {}, _lib.MhaWeightCopy()
        for name in names:
            shape = sizes[name]
            code = wt if name.startswith("w") or wt != _lib.DTYPE_Q8_0 else _lib.DTYPE_F32
            rows, cols = (shape[0], shape[1]) if len(shape) == 2 else (1, shape[0])
            held[name] = (np.zeros(rows * L.vkattn_dtype_row_bytes(code, cols), np.uint8), code)
            setattr(copy, name, held[name][0].ctypes.data)
        self.ctx._check(L.vkattn_mha_get_weights(self._h(), ctypes.byref(copy)))
        out = {}
        for name, (raw, code) in held.items():
            n = int(np.prod(sizes[name]))
            if code == _lib.DTYPE_Q8_0:
                f = np.zeros(n, np.float32)
                err = ctypes.create_string_buffer(256)
                r = L.vkattn_ref_dequantize(code, raw.ctypes.data, n,
                                            f.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                            err, len(err))
                if r != _lib.SUCCESS:
                    raise Error("dequantizing %s: %s" % (name, err.value.decode()))
            elif code == _lib.DTYPE_F32:
                f = raw.view(np.float32)
            elif code == _lib.DTYPE_F16:
                f = raw.view(np.float16).astype(np.float32)
            else:
                f = A.bf16_bits_to_f32(raw.view(np.uint16))
            out[name] = np.ascontiguousarray(f.reshape(sizes[name]), dtype=np.float32)
        return out

    def param_count(self):
        """The layer's parameters (vkattn_mha_param_count): a dict of wq, wk,
        wv, wo, bq, bk, bv, bo, bias_k, bias_v, weights, biases, total and
        bytes (as the device keeps them)."""
        return param_count_of(self.spec.desc)

    def kv_cache(self, max_tokens, batch=1, paged_block=0, num_blocks=0, dtype=None):
        """A KV cache for this layer: `batch` sequences of up to max_tokens
        each; paged_block > 0 makes it paged with blocks of that many tokens.
        dtype: None (the layer's), "f32", "f16", "bf16", or one of ggml's
        block formats "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"
        (quantized as K and V are appended, as ggml's reference quantizers
        do; rows padded with zeros to whole 32-value blocks)."""
        return KVCache(self, max_tokens, batch, paged_block, num_blocks, dtype)

    def step(self, x_new, cache, sequences=None, mask=None, head_mask=None):
        """One step over a KV cache: the T new tokens x_new [batch, T, embed_dim]
        of each sequence (sequences: their numbers, default 0..batch-1) are
        projected, appended to the cache and attend causally to it. Returns
        y [batch, T, embed_dim]. A prefill is a step with the whole prompt;
        prefill then decode steps equal one causal forward. mask: optional
        additive float mask [batch, T, K] or [T, K], K >= the sequence length.
        head_mask: as forward's ([num_heads] or [batch, num_heads])."""
        self._loaded()
        if not isinstance(cache, KVCache) or cache.layer is not self:
            raise bad("cache: a KV cache made by this layer's kv_cache()")
        keep, outs = [], []
        try:
            args = _lib.MhaStepArgs()
            args.x, xs = self._input("x_new", x_new, keep)
            batch, T = xs[0], xs[1]
            seqs = list(range(batch)) if sequences is None else [int(s) for s in sequences]
            if len(seqs) != batch:
                raise bad("sequences: %d numbers for a batch of %d" % (len(seqs), batch))
            if any(s < 0 or s >= cache.max_sequences for s in seqs):
                raise bad("sequences %s: the cache holds sequences 0..%d"
                          % (seqs, cache.max_sequences - 1))
            seq_arr = A.u32_array(seqs)
            args.cache = cache._h()
            args.batch = batch
            args.sequences = seq_arr
            y = Tensor(self.ctx, (batch, T, self.embed_dim), self.spec.desc.dtype)
            outs.append(y)
            args.y = y._vk()
            if mask is not None:
                args.mask, _ = self._input("mask", mask, keep, ranks=(2, 3))
            if head_mask is not None:
                args.head_mask, _ = self._input("head_mask", head_mask, keep, (1, 2),
                                                _lib.DTYPE_F32)
            self.ctx._check(L.vkattn_mha_step(self._h(), ctypes.byref(args)))
            return y.numpy()
        finally:
            for b in keep + outs:
                b.close()


def param_count_of(desc):
    counts = _lib.MhaParamCounts()
    err = ctypes.create_string_buffer(512)
    r = L.vkattn_mha_param_count(ctypes.byref(desc), ctypes.byref(counts), err, len(err))
    if r != _lib.SUCCESS:
        raise bad(err.value.decode(errors="replace"))
    return {name: int(getattr(counts, name)) for name, _ in _lib.MhaParamCounts._fields_}


def param_count(embed_dim, num_heads, num_kv_heads=None, head_dim=None, kdim=None, bias=True,
                weight_dtype=None, v_head_dim=None, dtype="f32", vdim=None, add_bias_kv=False):
    """The parameters of a layer of this shape without making it
    (vkattn_mha_param_count): wq, wk, wv, wo, bq, bk, bv, bo, bias_k, bias_v
    (add_bias_kv: torch's appended rows, counted in biases), weights,
    biases, total, and bytes in weight_dtype (None: dtype's). E.g.
    param_count(768, 12, bias=False)["total"] == 2359296; the total is
    torch's sum(p.numel() for p in module.parameters())."""
    spec = LayerSpec(embed_dim, num_heads, num_kv_heads, head_dim, kdim, bias, dtype,
                     weight_dtype=weight_dtype, v_head_dim=v_head_dim, vdim=vdim,
                     add_bias_kv=add_bias_kv)
    return param_count_of(spec.desc)


def kv_cache_bytes(num_heads, num_kv_heads, head_dim, v_head_dim=None, dtype="f16",
                   context=1, sequences=1):
    """(bytes per token, bytes of a cache of `sequences` x `context` tokens) of
    one layer's KV cache (vkattn_kv_cache_memory); dtype: "f32", "f16",
    "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1" or "iq4_nl"."""
    if dtype not in _CACHE_DTYPES:
        raise bad("dtype %r: use one of %s" % (dtype, _CACHE_DTYPE_NAMES))
    desc = _lib.KvCacheDesc()
    desc.num_heads = A.u32("num_heads", num_heads)
    desc.num_kv_heads = A.u32("num_kv_heads", num_kv_heads)
    desc.head_dim = A.u32("head_dim", head_dim)
    desc.v_head_dim = 0 if v_head_dim is None else A.u32("v_head_dim", v_head_dim)
    desc.dtype = _CACHE_DTYPES[dtype]
    desc.max_sequences = A.u32("sequences", sequences)
    desc.capacity = A.u32("context", context)
    per, total = ctypes.c_uint64(), ctypes.c_uint64()
    err = ctypes.create_string_buffer(512)
    r = L.vkattn_kv_cache_memory(ctypes.byref(desc), ctypes.byref(per), ctypes.byref(total),
                                 err, len(err))
    if r != _lib.SUCCESS:
        raise bad(err.value.decode(errors="replace"))
    return per.value, total.value


class KVCache:
    """The keys and values of one layer for `max_sequences` sequences
    (vkattn_kv_cache); made by MultiheadAttention.kv_cache."""

    def __init__(self, layer, max_tokens, batch=1, paged_block=0, num_blocks=0, dtype=None):
        self.layer = layer
        self.ctx = layer.ctx
        self._handle = None
        d = layer.spec.desc
        desc = _lib.KvCacheDesc()
        desc.num_kv_heads, desc.num_heads, desc.head_dim = d.num_kv_heads, d.num_heads, d.head_dim
        desc.v_head_dim = d.v_head_dim
        if dtype is not None and dtype not in _CACHE_DTYPES:
            raise bad("dtype %r: use None (the layer's) or one of %s" % (dtype, _CACHE_DTYPE_NAMES))
        desc.dtype = d.dtype if dtype is None else _CACHE_DTYPES[dtype]
        desc.max_sequences = A.u32("batch", batch)
        desc.capacity = A.u32("max_tokens", max_tokens)
        desc.block_size = A.u32("paged_block", paged_block)
        desc.num_blocks = A.u32("num_blocks", num_blocks)
        desc.window = d.window if paged_block else 0
        h = ctypes.c_void_p()
        self.ctx._check(L.vkattn_kv_cache_create(self.ctx._h(), ctypes.byref(desc),
                                                 ctypes.byref(h)))
        self._handle = h.value
        self.max_sequences = int(batch)
        self.capacity = int(max_tokens)
        self.ctx._register(self)

    def _h(self):
        if not self._handle or self.ctx.closed:
            raise Error("the KV cache is closed")
        return self._handle

    def length(self, sequence=0):
        """Tokens sequence `sequence` holds."""
        n = ctypes.c_uint32()
        self.ctx._check(L.vkattn_kv_cache_length(self._h(), A.u32("sequence", sequence),
                                                    ctypes.byref(n)))
        return n.value

    def truncate(self, sequence, length):
        """Forgets the tokens of a sequence from `length` on."""
        self.ctx._check(L.vkattn_kv_cache_truncate(self._h(), A.u32("sequence", sequence),
                                                      A.u32("length", length)))

    def reset(self):
        """Empties every sequence."""
        for s in range(self.max_sequences):
            self.truncate(s, 0)

    def close(self):
        if self._handle and not self.ctx.closed:
            L.vkattn_kv_cache_destroy(self._handle)
        self._handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


class TorchMultiheadAttention(MultiheadAttention):
    """vkattn.MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True,
    add_bias_kv=False, add_zero_attn=False, kdim=None, vdim=None,
    batch_first=False, device=None, dtype=None): torch.nn.MultiheadAttention's
    constructor, forward and defaults on vkattn's layer. device: a
    vkattn.Context (None: vkattn.default_context()); dtype: float32 (None),
    float16 or bfloat16 (torch's, numpy's or vkattn's names). Starts in
    training mode as torch's modules do: a dropout > 0 is refused there,
    ignored after .eval(). Inputs: torch tensors (results come back as torch
    tensors) or numpy arrays; [L, B, E] (batch_first=False), [B, L, E], or
    unbatched [L, E]."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        from ._torch_mha import _dtype_name
        ctx = device if isinstance(device, Context) else None
        if device is not None and ctx is None and str(device) != "cpu":
            raise bad("device %r: give a vkattn.Context (None: vkattn.default_context())"
                      % (device,))
        if not 0.0 <= float(dropout) <= 1.0:
            raise bad("dropout %g: a probability in 0..1" % float(dropout))
        self.dropout = float(dropout)
        self.batch_first = bool(batch_first)
        self.training = True
        self.num_heads = A.u32("num_heads", num_heads)
        super().__init__(ctx or default_context(), embed_dim, num_heads, bias=bias, kdim=kdim,
                         vdim=vdim if vdim is not None else kdim, dtype=_dtype_name(dtype),
                         add_bias_kv=add_bias_kv, add_zero_attn=add_zero_attn)

    def train(self, mode=True):
        self.training = bool(mode)
        return self

    def eval(self):
        return self.train(False)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Any torch.nn.MultiheadAttention's state dict (its names; strict
        and assign are accepted for torch's signature, every key must fit)."""
        super().load_state_dict(state_dict)
        return self

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        """(attn_output, attn_weights) as torch's: weights [B, L, S] averaged
        over heads (average_attn_weights=False: [B, H, L, S]; S counts the
        appended rows), None without need_weights. is_causal without
        attn_mask masks causally (top-left, as SDPA's); with one it is
        torch's hint and attn_mask rules."""
        from ._torch_mha import torch_forward
        return torch_forward(self, query, key, value, key_padding_mask, need_weights,
                             attn_mask, average_attn_weights, is_causal)

    __call__ = forward
