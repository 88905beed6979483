"""The context, device buffers and tensors, and attention on the device."""
import ctypes
import weakref

import numpy as np

from . import _arrays as A
from . import _attention
from . import _lib
from ._errors import Error, bad, check

L = _lib.lib


def _info_dict(info, chosen=None):
    d = {
        "index": info.index,
        "name": info.name.decode(errors="replace"),
        "driver_name": info.driver_name.decode(errors="replace"),
        "driver_info": info.driver_info.decode(errors="replace"),
        "type": L.vkattn_device_type_name(info.type).decode(),
        "subgroup_size": info.subgroup_size,
        "storage_16bit": bool(info.storage_16bit),
        "max_storage_buffer_range": info.max_storage_buffer_range,
        "supported": bool(info.supported),
        "unsupported_reason": info.unsupported_reason.decode(errors="replace"),
        # cooperative matrices: the f16 x f16 -> f32 subgroup shapes (m, n, k),
        # the kernels' one (None: the family cannot run here, see coopmat_why)
        "coopmat_shapes": [(s.m, s.n, s.k) for s in info.coopmat_shapes[:info.coopmat_shape_count]],
        "coopmat_shape": ((info.coopmat_shape.m, info.coopmat_shape.n, info.coopmat_shape.k)
                          if info.coopmat_shape.m else None),
        "coopmat_kernels": bool(info.coopmat_kernels),
        "coopmat_why": info.coopmat_why.decode(errors="replace"),
    }
    if chosen is not None:
        d["chosen"] = chosen
    return d


def _report_dict(rep):
    """A vkattn_self_test_report as a dict (Context.self_test)."""
    def text(b):
        return b.decode(errors="replace")
    return {
        "source": _lib.SELF_TEST_SOURCES[rep.source],
        "ms": rep.ms,
        "every_op_has_a_family": bool(rep.every_op_has_a_family),
        "features": {name: {"offered": bool(f.offered), "works": bool(f.works),
                            "on": bool(f.on), "why": text(f.why)}
                     for name, f in zip(_lib.FEATURES, rep.features)},
        "checks": [{"name": text(c.name), "feature": _lib.FEATURES[c.feature],
                    "checked": bool(c.checked), "passed": bool(c.passed), "ms": c.ms,
                    "detail": text(c.detail)}
                   for c in rep.checks[:rep.check_count]],
        "quirks": [{"id": text(q.id), "applied": bool(q.applied), "why": text(q.why),
                    "reproducer": text(q.reproducer),
                    "turns_off": [n for i, n in enumerate(_lib.FEATURES)
                                  if q.turns_off >> i & 1]}
                   for q in rep.quirks[:rep.quirk_count]],
    }


def devices(device=None):
    """The Vulkan devices of the system as dicts (index, name, driver_name,
    type, subgroup_size, storage_16bit, supported, unsupported_reason, ...);
    "chosen" marks the one Context(device) would take."""
    count, chosen = ctypes.c_uint32(0), ctypes.c_uint32(0)
    sel = None if device is None else str(device).encode()
    check(L.vkattn_list_devices(sel, None, 0, ctypes.byref(count), None, _lib.LOG_FN(), None))
    infos = (_lib.DeviceInfo * max(count.value, 1))()
    check(L.vkattn_list_devices(sel, infos, count.value, ctypes.byref(count),
                                ctypes.byref(chosen), _lib.LOG_FN(), None))
    return [_info_dict(infos[i], infos[i].index == chosen.value) for i in range(count.value)]


class Context:
    """A Vulkan device with vkattn on it (vkattn_context).

    device: None (automatic: discrete > integrated > virtual > CPU), an index
    into vkattn.devices(), or part of a device name (case-insensitive), as the
    CLI's --device. validate=True enables the Khronos validation layer; its
    messages are counted (validation_counts()) and kept in `messages`.
    kernels: "auto" (the device's choice, checked by the start-up self-test),
    "subgroup" or "shared" (an error when the self-test turned that family
    off), or "coopmat" (the cooperative-matrix kernels for the ops they
    implement - GEMMs, attention, KV-cache attention - on any device that has them, CPU
    drivers included; an error where it has not); texel_buffers=False reads inputs through storage buffers only;
    self_test=False skips the start-up checks (see self_test()).
    Use as a context manager, or call close(). Objects made from a context
    (tensors, layers, caches) keep it alive and are closed with it."""

    def __init__(self, device=None, validate=False, kernels="auto", texel_buffers=True,
                 self_test=True):
        self._handle = None
        self._objects = weakref.WeakSet()
        self.messages = messages = []

        # the logger keeps warnings and errors (validation messages among
        # them); it holds the list, not the context, so no cycle keeps a
        # dropped context alive
        def on_log(user, level, message):
            if level >= _lib.LOG_WARNING and len(messages) < 1000:
                messages.append(message.decode(errors="replace"))
        self._log = _lib.LOG_FN(on_log)
        desc = _lib.ContextDesc()
        if device is not None:
            desc.device = str(device).encode()
        family = {"auto": 0, "subgroup": _lib.CONTEXT_SUBGROUP_KERNELS,
                  "shared": _lib.CONTEXT_NO_SUBGROUP_KERNELS,
                  "coopmat": _lib.CONTEXT_COOPMAT_KERNELS}
        if kernels not in family:
            raise bad("kernels=%r: expected 'auto', 'subgroup', 'shared' or 'coopmat'"
                      % (kernels,))
        desc.flags = ((_lib.CONTEXT_VALIDATION if validate else 0) | family[kernels]
                      | (0 if texel_buffers else _lib.CONTEXT_NO_TEXEL_BUFFERS)
                      | (0 if self_test else _lib.CONTEXT_NO_SELF_TEST))
        desc.log = self._log
        handle = ctypes.c_void_p()
        r = L.vkattn_context_create(ctypes.byref(desc), ctypes.byref(handle))
        check(r, self.messages[-1] if self.messages else "")
        self._handle = handle.value
        self.device = _info_dict(L.vkattn_context_device_info(self._handle).contents)

    # ---------------------------------------------------------- lifetime
    def _h(self):
        if not self._handle:
            raise Error("the context is closed")
        return self._handle

    def _register(self, obj):
        self._objects.add(obj)

    def close(self):
        """Destroys every object made from the context, then the context."""
        if self._handle:
            for obj in list(self._objects):
                obj.close()
            L.vkattn_context_destroy(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    @property
    def closed(self):
        return not self._handle

    def self_test(self, run=False):
        """The start-up self-test (vkattn/selftest.h) as a dict: "source"
        ("ran", "cached" from the pipeline cache, "skipped"), "ms",
        "every_op_has_a_family", "features" (subgroup_kernels,
        shared_kernels, texel_inputs, storage_16bit, coopmat_kernels: offered, works, on,
        why), "checks" (name, feature, checked, passed, ms, detail) and
        "quirks" (id, applied, turns_off, why, reproducer). run=True runs
        every check now and applies the result (vkattn_context_run_self_test)."""
        rep = _lib.SelfTestReport()
        fn = L.vkattn_context_run_self_test if run else L.vkattn_context_self_test
        self._check(fn(self._h(), ctypes.byref(rep)))
        if run:
            self.device = _info_dict(L.vkattn_context_device_info(self._handle).contents)
        return _report_dict(rep)

    def last_error(self):
        return L.vkattn_context_last_error(self._h()).decode(errors="replace")

    def _check(self, code):
        if code != _lib.SUCCESS:
            check(code, self.last_error())

    def tune_linear(self, m, n, k, x_dtype="f32", w_dtype="f32", progress=None):
        """Measures the kernel choices of y [m, n] = x [m, k] W^T (vkattn_linear_tune)
        and keeps the fastest in this context. progress: see vkattn._tuning."""
        from . import _tuning
        _tuning.tune_linear(self, m, n, k, x_dtype, w_dtype, progress)

    def tune_attention(self, batch, num_heads, num_kv_heads, q_len, kv_len, head_dim,
                       causal=False, q_dtype="f32", kv_dtype=None, progress=None):
        """The same for attention of these shapes (vkattn_attention_tune);
        progress(p) gets a TuneProgress(op, shape, candidate, count, done,
        best_ms) before each candidate and when the op is measured."""
        from . import _tuning
        _tuning.tune_attention(self, batch, num_heads, num_kv_heads, q_len, kv_len, head_dim,
                               causal, q_dtype, kv_dtype, progress)

    def validation_counts(self):
        """(errors, warnings) the validation layer reported so far."""
        e, w = ctypes.c_uint32(), ctypes.c_uint32()
        L.vkattn_context_validation_counts(self._h(), ctypes.byref(e), ctypes.byref(w))
        return e.value, w.value

    # ---------------------------------------------------------- tensors
    def _buffer(self, nbytes):
        return _Buffer(self, nbytes)

    def tensor(self, array, dtype="f32"):
        """A device tensor holding `array` (anything with __array__), stored
        as dtype ("f32", "f16", "bf16"; or "u8" for masks, "i32"). Any call
        takes it in place of an array, without uploading again."""
        code = A.dtype_code(dtype, allowed=tuple(A.DTYPE_NAMES))
        a = A.as_numpy(array, "array")
        if a.ndim > _lib.MAX_RANK or a.ndim == 0:
            raise bad("array: rank %d; tensors have rank 1 to %d" % (a.ndim, _lib.MAX_RANK))
        s = A.to_storage(a.astype(np.uint8) if a.dtype == np.bool_ else a, code)
        t = Tensor(self, s.shape, code)
        t._buf.upload(s)
        return t

    def empty(self, shape, dtype="f32"):
        """An uninitialised device tensor (an output of your own)."""
        return Tensor(self, tuple(int(n) for n in shape),
                      A.dtype_code(dtype, allowed=tuple(A.DTYPE_NAMES)))

    # ---------------------------------------------------------- attention
    def attention(self, q, k, v, **kw):
        """Attention on the device: softmax(scale q k^T + mask) v per head.

        q [B, Hq, Tq, Dk], k [B, Hkv, Tk, Dk], v [B, Hkv, Tk, Dv]
        (layout="bthd": [B, T, H, D], read through strides, output likewise);
        q may be [Hq, Tq, Dk] ("bthd": [Tq, Hq, Dk]): the same queries for
        every batch row of k and v, as torch's scaled_dot_product_attention
        broadcasts it;
        Hq % Hkv == 0 (GQA: head h reads KV head h // (Hq // Hkv)).
        Returns out [B, Hq, Tq, Dv] (numpy, dtype float32 / float16; bf16 as
        float32), or a tuple (out, weights?, lse?) with need_weights /
        return_lse. Arrays or device tensors (ctx.tensor) everywhere.

        Keywords (vkattn's semantics; where PyTorch differs it is said):
          causal          key j visible to query i iff j <= i + Tk - Tq
                          (bottom-right, as a KV cache needs);
                          causal_top_left=True: j <= i (SDPA's is_causal)
          mask            float (additive, -inf hides) or bool/uint8 (boolean),
                          rank 2 [Tq, Tk], 3 [B*Hq, Tq, Tk] (nn.MultiheadAttention's
                          3-D attn_mask) or 4 [B, Hq, Tq, Tk], any dim 1 broadcast.
                          Boolean: True = attend (SDPA's attn_mask, the default);
                          mask_true_blocks=True: True = hidden (nn.MultiheadAttention)
          key_padding     [B, Tk], 1 = real token, 0 = padding (vkattn's convention)
          key_padding_mask [B, Tk], torch's convention: True = ignore (padding)
                          -- the opposite of key_padding; give one of the two
          scale           None: 1/sqrt(Dk)
          dtype           "f32", "f16" or "bf16": how host q, k, v are stored
          need_weights    also return the softmax weights, [B, Tq, Tk] averaged
                          over heads (per_head=True: [B, Hq, Tq, Tk])
          window, softcap, sinks [Hq], alibi_slopes [Hq], alibi_max_bias:
                          score modifiers (see include/vkattn/ops.h)
          return_lse      also return log-sum-exp [B, Hq, Tq] (float32)
          head_mask       float32 [Hq] or [B, Hq]: head h's output (and weights)
                          of batch row b times head_mask[b, h]; 0 removes the
                          head (Hugging Face's head_mask)
          cu_seqlens      packed ragged batch (FlashAttention's varlen form): B + 1
                          integer offsets (numpy, list or torch; int32 range),
                          sequence i's queries at tokens [cu_seqlens[i],
                          cu_seqlens[i + 1]) of q [1, Hq, sum Tq, Dk] ("bthd":
                          [1, sum Tq, Hq, Dk]); each sequence is attended alone, as
                          one batch row (causal, window, ... per sequence); out
                          and lse are packed likewise. q, k, v may leave out the
                          batch row: [Hq, sum T, D], "bthd": [sum T, Hq, D]
                          (flash_attn_varlen_func's), and then out and lse
                          ([Hq, sum Tq]) do too. Not with mask, key_padding(_mask)
                          or need_weights; head_mask may be [B, Hq]
          cu_seqlens_k    the keys' offsets into k, v [1, Hkv, sum Tk, D] (None:
                          cu_seqlens); the library's messages call the two
                          q_offsets and k_offsets
        Rows with no visible key give zeros, never NaN."""
        return _attention.attention(_DeviceBackend(self), q, k, v, **kw)


class _Buffer:
    """A vkattn_buffer, destroyed with close() or when the context closes."""

    def __init__(self, ctx, nbytes):
        self.ctx = ctx
        self.handle = None
        self.nbytes = max(int(nbytes), 4)
        desc = _lib.BufferDesc(size=(self.nbytes + 3) // 4 * 4)
        h = ctypes.c_void_p()
        ctx._check(L.vkattn_buffer_create(ctx._h(), ctypes.byref(desc), ctypes.byref(h)))
        self.handle = h.value
        ctx._register(self)

    def upload(self, a):
        a = np.ascontiguousarray(a)
        self.ctx._check(L.vkattn_buffer_upload(self.handle, 0, a.ctypes.data, a.nbytes))

    def download(self, a):
        self.ctx._check(L.vkattn_buffer_download(self.handle, 0, a.ctypes.data, a.nbytes))
        return a

    def close(self):
        if self.handle and not self.ctx.closed:
            L.vkattn_buffer_destroy(self.handle)
        self.handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


class Tensor:
    """A contiguous tensor in device memory (ctx.tensor / ctx.empty). numpy()
    downloads it. It keeps its context alive; close() frees it early."""

    def __init__(self, ctx, shape, code):
        self.ctx = ctx
        self.shape = tuple(int(n) for n in shape)
        self.code = code
        self._buf = _Buffer(ctx, int(np.prod(self.shape, dtype=np.int64)) *
                            np.dtype(A.STORAGE[code]).itemsize)
        ctx._register(self)

    @property
    def dtype(self):
        return A.DTYPE_NAMES[self.code]

    def _strides(self):
        st, acc = [], 1
        for n in reversed(self.shape):
            st.append(acc)
            acc *= n
        return st[::-1]

    def _vk(self, perm=None):
        if not self._buf.handle:
            raise Error("the tensor is closed")
        t = _lib.Tensor()
        t.buffer = self._buf.handle
        shape, strides = _attention.permute(self.shape, self._strides(), perm)
        A.fill(t, shape, strides, self.code)
        return t

    def numpy(self):
        a = np.empty(self.shape, dtype=A.STORAGE[self.code])
        return A.from_storage(self._buf.download(a), self.code)

    def __array__(self, dtype=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def close(self):
        self._buf.close()

    def __repr__(self):
        return "vkattn.Tensor(shape=%s, dtype=%s)" % (self.shape, self.dtype)


class _DeviceBackend:
    """Operands on the device: arrays are uploaded per call, tensors used as they are."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.keep = []

    def args(self):
        return _lib.AttentionArgs()

    @staticmethod
    def is_device_tensor(x):
        return isinstance(x, Tensor)

    def input(self, name, x, code, ranks, perm=None, kind=None):
        if isinstance(x, Tensor):
            if x.ctx is not self.ctx:
                raise bad("%s: a tensor of another context" % name)
            A.check_rank(x.shape, name, ranks)
            return x._vk(perm)
        a, shape, strides, code = _attention.host_operand(name, x, code, ranks, perm, kind)
        buf = self.ctx._buffer(a.nbytes)
        buf.upload(a)
        self.keep.append(buf)
        t = _lib.Tensor()
        t.buffer = buf.handle
        A.fill(t, shape, strides, code)
        return t

    def output(self, name, shape, code, perm=None):
        """(tensor struct, fetch) of an output in vkattn's [B, H, T, D] view;
        with a layout permutation the array is held in the user's layout."""
        user_shape = shape if perm is None else [shape[p] for p in perm]  # BTHD is its own inverse
        t = Tensor(self.ctx, user_shape, code)
        self.keep.append(t)

        def fetch():
            try:
                return t.numpy()
            finally:
                t.close()
        return t._vk(perm), fetch

    def run(self, args):
        try:
            self.ctx._check(L.vkattn_attention(self.ctx._h(), ctypes.byref(args)))
        except Exception:
            self.release()
            raise

    def release(self):
        for b in self.keep:
            b.close()
        self.keep = []

    def __del__(self):
        self.release()


_default = []  # the one context default_context() made, while it is open


def default_context():
    """A Context on the automatic device, made on first use and shared by
    everything that is given none (the torch-signature MultiheadAttention);
    close it with .close() (the next call makes another)."""
    if not _default or _default[0].closed:
        _default[:] = [Context()]
    return _default[0]
