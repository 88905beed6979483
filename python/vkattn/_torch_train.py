"""vkattn.torch.MultiheadAttention: torch.nn.MultiheadAttention as a
torch.nn.Module whose forward and backward are vkattn's (vkattn_mha_forward
and vkattn_mha_backward), so a torch optimizer trains it.

The parameters are torch's own (names, shapes, initialisation), so
load_state_dict takes a torch.nn.MultiheadAttention's state dict as is. Each
forward uploads the parameters' current values to a vkattn layer
(vkattn_mha_set_weights); the backward runs vkattn_mha_backward with the
forward's arguments (the same dropout seed) and returns the gradients of the
inputs and of every parameter. float32, float16 and bfloat16 modules run on
the device in that dtype; float64 ones (or reference=True) on the CPU
reference (vkattn_ref_mha, vkattn_ref_mha_backward: double accumulation over
f32-rounded values), which gradcheck can check."""
import ctypes
import weakref

import numpy as np
import torch
from torch.autograd.function import once_differentiable
from torch.nn.modules.linear import NonDynamicallyQuantizableLinear

from . import _lib
from ._context import Context, _DeviceBackend, default_context
from ._errors import bad, check
from ._mha import LayerSpec, MultiheadAttention as _DeviceLayer
from ._torch_mha import _additive
from .reference import _HostBackend

L = _lib.lib

_DEVICE_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
_CODES = {"f32": _lib.DTYPE_F32, "f16": _lib.DTYPE_F16, "bf16": _lib.DTYPE_BF16}
# the order the autograd function takes the parameters in (vkattn_mha_grads' names)
_PARAMS = ("wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo")


class MultiheadAttention(torch.nn.Module):
    """torch.nn.MultiheadAttention(embed_dim, num_heads, dropout=0.0,
    bias=True, add_bias_kv=False, add_zero_attn=False, kdim=None, vdim=None,
    batch_first=False, device=None, dtype=None) on vkattn, with autograd.

    Same parameters as torch's: in_proj_weight [(Hq + 2 Hkv) * Dh, E] and
    in_proj_bias, or q_proj_weight, k_proj_weight, v_proj_weight when kdim or
    vdim differ from embed_dim; out_proj (weight, bias). vkattn's keywords:
    num_kv_heads (GQA: Hkv key/value heads, dividing num_heads; torch's
    state dicts need Hkv == num_heads), ctx (a vkattn.Context; None:
    vkattn.default_context()), reference (True: the CPU reference whatever
    the dtype). add_bias_kv and add_zero_attn are refused (vkattn's backward
    does not take them). device: None or "cpu" (tensors live on the host)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None, *, num_kv_heads=None, ctx=None, reference=False):
        super().__init__()
        if add_bias_kv or add_zero_attn:
            raise bad("add_bias_kv / add_zero_attn: vkattn's MHA backward does not take them "
                      "(vkattn.MultiheadAttention has them for inference)")
        if device is not None and torch.device(device).type != "cpu":
            raise bad("device %r: vkattn.torch takes CPU tensors (the Vulkan device is "
                      "chosen by ctx)" % (device,))
        if ctx is not None and not isinstance(ctx, Context):
            raise bad("ctx: a vkattn.Context (None: vkattn.default_context())")
        if not 0.0 <= float(dropout) < 1.0:
            raise bad("dropout %g: a probability in [0, 1)" % float(dropout))
        factory = {"device": device, "dtype": dtype}
        self.embed_dim = int(embed_dim)
        self.kdim = self.embed_dim if kdim is None else int(kdim)
        self.vdim = self.embed_dim if vdim is None else int(vdim)
        self._qkv_same_embed_dim = self.kdim == self.embed_dim and self.vdim == self.embed_dim
        self.num_heads = int(num_heads)
        self.num_kv_heads = self.num_heads if num_kv_heads is None else int(num_kv_heads)
        self.dropout = float(dropout)
        self.batch_first = bool(batch_first)
        if self.num_heads <= 0 or self.embed_dim % self.num_heads:
            raise bad("embed_dim %d must be divisible by num_heads %d"
                      % (self.embed_dim, self.num_heads))
        self.head_dim = self.embed_dim // self.num_heads
        # checks the shape as vkattn_mha_create will (GQA divisibility, ...)
        self._spec = LayerSpec(self.embed_dim, self.num_heads, self.num_kv_heads, None,
                               self.kdim, bias, "f32", vdim=self.vdim)
        self._ctx = ctx
        self.reference = bool(reference)
        self._layers = {}  # vkattn layers on the device, per dtype
        q, kv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        self._rows = (q, kv, kv)
        E = self.embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = torch.nn.Parameter(torch.empty(q + 2 * kv, E, **factory))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = torch.nn.Parameter(torch.empty(q, E, **factory))
            self.k_proj_weight = torch.nn.Parameter(torch.empty(kv, self.kdim, **factory))
            self.v_proj_weight = torch.nn.Parameter(torch.empty(kv, self.vdim, **factory))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = torch.nn.Parameter(torch.empty(q + 2 * kv, **factory))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(E, E, bias=bias, **factory)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = False
        self._reset_parameters()

    def _reset_parameters(self):
        """torch's initialisation: Xavier-uniform projections, zero biases."""
        if self._qkv_same_embed_dim:
            torch.nn.init.xavier_uniform_(self.in_proj_weight)
        else:
            torch.nn.init.xavier_uniform_(self.q_proj_weight)
            torch.nn.init.xavier_uniform_(self.k_proj_weight)
            torch.nn.init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            torch.nn.init.constant_(self.in_proj_bias, 0.0)
            torch.nn.init.constant_(self.out_proj.bias, 0.0)

    def __getstate__(self):  # copy.deepcopy, pickle: the device layers stay behind
        state = dict(self.__dict__)
        state["_layers"] = {}
        state["_ctx"] = None
        return state

    def extra_repr(self):
        return "embed_dim=%d, num_heads=%d, num_kv_heads=%d, dropout=%g, batch_first=%s" % (
            self.embed_dim, self.num_heads, self.num_kv_heads, self.dropout, self.batch_first)

    def _parameters_in_order(self):
        """wq, wk, wv, wo, bq, bk, bv, bo as tensors (views of in_proj_*;
        None for absent biases), differentiable back to the parameters."""
        if self._qkv_same_embed_dim:
            wq, wk, wv = self.in_proj_weight.split(self._rows, 0)
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        bq = bk = bv = None
        if self.in_proj_bias is not None:
            bq, bk, bv = self.in_proj_bias.split(self._rows, 0)
        return wq, wk, wv, self.out_proj.weight, bq, bk, bv, self.out_proj.bias

    def _layer(self, dtype_name):
        """The vkattn layer this module runs on for that dtype (made on first use)."""
        ctx = self._ctx if self._ctx is not None else default_context()
        layer = self._layers.get(dtype_name)
        if layer is None or layer.ctx is not ctx or layer.ctx.closed:
            layer = _DeviceLayer(ctx, self.embed_dim, self.num_heads, self.num_kv_heads,
                                 bias=self.in_proj_bias is not None, kdim=self.kdim,
                                 vdim=self.vdim, dtype=dtype_name)
            layer._torch_uploaded = None
            self._layers[dtype_name] = layer
        return layer

    def forward(self, query, key, value, key_padding_mask=None, need_weights=False,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        """(attn_output, attn_weights) as torch's: query [L, B, E] ([B, L, E]
        with batch_first, [L, E] unbatched), key [S, B, kdim], value
        [S, B, vdim]; attn_mask [L, S] or [B * H, L, S], bool True = not
        allowed or float added; key_padding_mask [B, S], True = ignore.
        is_causal without attn_mask masks causally (top-left); with one it
        is torch's hint and attn_mask rules. attn_weights: None, or with
        need_weights [B, L, S] averaged over heads (average_attn_weights=False:
        [B, H, L, S]) without gradient; need_weights is refused in training
        mode with dropout > 0 (vkattn's weights are those before dropout,
        torch's after). Gradients reach query, key, value and every parameter.
        The default need_weights=False differs from torch's True: the weights
        cost a pass of their own and carry no gradient."""
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, torch.Tensor):
                raise bad("%s: a torch.Tensor is expected, not %s" % (name, type(t).__name__))
            if t.device.type != "cpu":
                raise bad("%s: on %s; vkattn.torch takes CPU tensors" % (name, t.device))
        dtype = self.out_proj.weight.dtype
        if not query.dtype == key.dtype == value.dtype == dtype:
            raise bad("query, key, value: dtypes %s, %s, %s; the module's parameters are %s "
                      "(convert the inputs or the module)"
                      % (query.dtype, key.dtype, value.dtype, dtype))
        reference = self.reference or dtype == torch.float64
        if not reference and dtype not in _DEVICE_DTYPES:
            raise bad("dtype %s: float32, float16, bfloat16 (the device) or float64 (the CPU "
                      "reference)" % dtype)
        dropout_p = self.dropout if self.training else 0.0
        if need_weights and dropout_p > 0.0:
            raise bad("need_weights=True in training mode with dropout %g: vkattn's attention "
                      "weights are those before dropout, torch's after; call .eval() or pass "
                      "need_weights=False" % dropout_p)
        self_attention = key is query and value is query and self._qkv_same_embed_dim
        value_is_key = value is key
        batched = query.dim() == 3
        if query.dim() not in (2, 3) or key.dim() != query.dim() or value.dim() != query.dim():
            raise bad("query, key, value: ranks %d, %d, %d; all 3 (batched) or all 2 "
                      "(unbatched [L, E])" % (query.dim(), key.dim(), value.dim()))
        if not batched:
            q, k, v = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            q, k, v = query, key, value
        else:  # [L, B, E] -> [B, L, E]
            q, k, v = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        B, Tq, Tk = q.shape[0], q.shape[1], k.shape[1]
        mask, pad = _masks(attn_mask, key_padding_mask, B, self.num_heads, Tq, Tk)
        seed = 0
        if dropout_p > 0.0:
            from .torch import _draw_seed
            seed = _draw_seed()
        call = _Call(module=self, reference=reference, dtype=dtype,
                     code=_lib.DTYPE_F32 if reference else _CODES[_DEVICE_DTYPES[dtype]],
                     layer=None if reference else self._layer(_DEVICE_DTYPES[dtype]),
                     mask=mask, pad=pad, causal=bool(is_causal) and attn_mask is None,
                     dropout_p=float(dropout_p), seed=seed,
                     weights_shape=None if not need_weights else
                     (B, Tq, Tk) if average_attn_weights else (B, self.num_heads, Tq, Tk))
        kv = None if self_attention else k
        val = None if self_attention or value_is_key else v
        out = _MhaFunction.apply(call, q, kv, val, *self._parameters_in_order())
        y, w = out if need_weights else (out, None)
        if not batched:
            y = y.squeeze(0)
            w = None if w is None else w.squeeze(0)
        elif not self.batch_first:
            y = y.transpose(0, 1)
        return y, w


def _masks(attn_mask, key_padding_mask, B, H, Tq, Tk):
    """(mask, key padding) as vkattn takes them: attn_mask as a rank-4 numpy
    array (bool: True = blocked, passed as u8 with BOOL_MASK_TRUE_BLOCKS;
    float: additive), a float key_padding_mask with values other than 0 and
    -inf folded into it; key padding u8 [B, S], 1 = token."""
    mask = None
    if attn_mask is not None:
        m = attn_mask.detach()
        if m.dtype != torch.bool and not m.dtype.is_floating_point:
            raise bad("attn_mask: dtype %s; bool (True = not allowed) or float (added)"
                      % m.dtype)
        m = m.cpu().numpy() if m.dtype == torch.bool else m.cpu().to(torch.float32).numpy()
        if m.ndim == 2:
            if m.shape != (Tq, Tk):
                raise bad("attn_mask: shape %s; expected [L, S] = [%d, %d]"
                          % (m.shape, Tq, Tk))
            m = m[None, None]
        elif m.ndim == 3:
            if m.shape != (B * H, Tq, Tk):
                raise bad("attn_mask: shape %s; expected [B * num_heads, L, S] = [%d, %d, %d]"
                          % (m.shape, B * H, Tq, Tk))
            m = m.reshape(B, H, Tq, Tk)
        else:
            raise bad("attn_mask: rank %d; 2 ([L, S]) or 3 ([B * num_heads, L, S])" % m.ndim)
        mask = m
    pad = None
    if key_padding_mask is not None:
        kpm = key_padding_mask.detach().cpu()
        if tuple(kpm.shape) != (B, Tk):
            raise bad("key_padding_mask: shape %s; expected [B, S] = [%d, %d] (True = ignore)"
                      % (tuple(kpm.shape), B, Tk))
        kpm = kpm.numpy() if kpm.dtype == torch.bool else kpm.to(torch.float32).numpy()
        if kpm.dtype == np.bool_ or np.all((kpm == 0) | np.isneginf(kpm)):
            pad = np.ascontiguousarray(kpm == 0, dtype=np.uint8)  # 1 = token
        else:  # a float mask with other values: added to the scores, as torch does
            base = 0.0 if mask is None else _additive(mask, B, H)
            mask = np.ascontiguousarray(base + kpm.astype(np.float32)[:, None, None, :])
    return mask, pad


class _Call:
    """Everything of one forward but the differentiable tensors."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def _host_weights(params):
    """{name: float32 contiguous array} of the parameters given (not None)."""
    return {n: np.ascontiguousarray(p.detach().to(torch.float32).numpy())
            for n, p in zip(_PARAMS, params) if p is not None}


def _upload(call, params):
    """vkattn_mha_set_weights with these values unless the layer holds this
    call's already (a backward right after its forward). Every forward
    uploads: a version check would miss changes made through .data."""
    layer = call.layer
    held = layer._torch_uploaded
    if held is not None and held() is call:
        return
    weights = _host_weights(params)
    cw = layer.spec.c_weights(weights, _lib.DTYPE_F32)
    layer.ctx._check(L.vkattn_mha_set_weights(layer._h(), ctypes.byref(cw)))
    layer.host_weights = weights
    layer._torch_uploaded = weakref.ref(call)


def _forward_args(call, backend, args, x, kv, value):
    code = call.code
    args.x = backend.input("x", x, code, ranks=(3,))
    if kv is not None:
        args.kv = backend.input("kv", kv, code, ranks=(3,))
    if value is not None:
        args.value = backend.input("value", value, code, ranks=(3,))
    if call.mask is not None:
        args.mask = backend.input("attn_mask", call.mask, None, ranks=(4,), kind="mask")
    if call.pad is not None:
        args.key_padding = backend.input("key_padding_mask", call.pad, _lib.DTYPE_U8,
                                         ranks=(2,))
    args.causal = call.causal
    args.causal_align = _lib.CAUSAL_TOP_LEFT
    args.bool_mask = _lib.BOOL_MASK_TRUE_BLOCKS
    args.dropout_p = call.dropout_p
    args.dropout_seed = call.seed
    return args


def _ref_run(fn, call, weights, args):
    desc = call.module._spec.ref_desc()
    cw = call.module._spec.c_weights(weights, _lib.DTYPE_F32)
    err = ctypes.create_string_buffer(512)
    check(fn(ctypes.byref(desc), ctypes.byref(cw), ctypes.byref(args), err, len(err)),
          err.value.decode(errors="replace"))


def _to_torch(a, dtype):
    return torch.from_numpy(np.ascontiguousarray(a)).to(dtype)


def _forward(call, x, kv, value, params):
    B, Tq = x.shape[0], x.shape[1]
    E = call.module.embed_dim
    backend = _HostBackend() if call.reference else _DeviceBackend(call.layer.ctx)
    try:
        args = _forward_args(call, backend,
                             _lib.RefMhaArgs() if call.reference else _lib.MhaForwardArgs(),
                             x, kv, value)
        args.y, fetch_y = backend.output("y", [B, Tq, E], call.code)
        fetch_w = None
        if call.weights_shape is not None:
            args.weights, fetch_w = backend.output("weights", list(call.weights_shape),
                                                   _lib.DTYPE_F32)
        if call.reference:
            _ref_run(L.vkattn_ref_mha, call, _host_weights(params), args)
        else:
            call.layer._torch_uploaded = None  # a forward always uploads
            _upload(call, params)
            call.layer.ctx._check(L.vkattn_mha_forward(call.layer._h(), ctypes.byref(args)))
        y = _to_torch(fetch_y(), call.dtype)
        w = None if fetch_w is None else _to_torch(fetch_w(), call.dtype)
        return y, w
    finally:
        backend.release()


def _backward(call, x, kv, value, params, dy, needs):
    """(dx, dkv, dvalue, dwq, dwk, dwv, dwo, dbq, dbk, dbv, dbo), None where
    needs (needs_input_grad of x, kv, value and the parameters) is False."""
    backend = _HostBackend() if call.reference else _DeviceBackend(call.layer.ctx)
    try:
        if call.reference:
            a = _lib.RefMhaBackwardArgs()
            a.forward = _forward_args(call, backend, _lib.RefMhaArgs(), x, kv, value)
            a.dy = backend.input("dy", dy, _lib.DTYPE_F32, ranks=(3,))
        else:
            a = _lib.MhaBackwardArgs()
            a.forward = _forward_args(call, backend, _lib.MhaForwardArgs(), x, kv, value)
            a.dy = backend.input("dy", dy, call.code, ranks=(3,))
        fetches = []
        for name, t, need in (("dx", x, needs[0]), ("dkv", kv, needs[1]),
                              ("dvalue", value, needs[2])):
            f = None
            if t is not None and need:
                tensor, f = backend.output(name, list(t.shape), _lib.DTYPE_F32)
                setattr(a, name, tensor)
            fetches.append((f, t))
        for name, p, need in zip(_PARAMS, params, needs[3:]):
            f = None
            if p is not None and need:
                tensor, f = backend.output("d" + name, list(p.shape), _lib.DTYPE_F32)
                setattr(a.grads, name, tensor)
            fetches.append((f, p))
        if call.reference:
            _ref_run(L.vkattn_ref_mha_backward, call, _host_weights(params), a)
        else:
            _upload(call, params)
            call.layer.ctx._check(L.vkattn_mha_backward(call.layer._h(), ctypes.byref(a)))
        return tuple(None if f is None else _to_torch(f(), t.dtype) for f, t in fetches)
    finally:
        backend.release()


class _MhaFunction(torch.autograd.Function):
    @staticmethod
    def forward(fctx, call, x, kv, value, *params):
        y, w = _forward(call, x, kv, value, params)
        fctx.call = call
        fctx.save_for_backward(x, kv, value, *params)
        if w is None:
            return y
        fctx.mark_non_differentiable(w)
        return y, w

    @staticmethod
    @once_differentiable
    def backward(fctx, dy, *_):
        x, kv, value, *params = fctx.saved_tensors
        needs = fctx.needs_input_grad[1:]
        if dy is None or not any(needs):
            return (None,) * (1 + len(needs))
        grads = _backward(fctx.call, x, kv, value, params, dy.contiguous(), needs)
        return (None,) + grads


__all__ = ["MultiheadAttention"]
