"""The tuners (vkattn_<op>_tune) with an optional progress callable.

progress(p) is called on the calling thread, from inside the tuner: before
each candidate is timed (p.candidate 1..p.count, p.done False) and when each
op's measurement ends (p.done True, p.best_ms the winner's median). A layer
tuner reports every op it measures ("linear", "attention", "kv_attention")
with its shape. An exception raised by the callable stops nothing inside
the library (the tuner cannot be interrupted); it is raised again, as
itself, once the tuner returns, and later calls of that tuning are skipped.
"""
import collections
import ctypes

from . import _arrays as A
from . import _lib

L = _lib.lib

TuneProgress = collections.namedtuple("TuneProgress",
                                      "op shape candidate count done best_ms")


class _Sink:
    """A CFUNCTYPE around the user's callable, kept alive for the call."""

    def __init__(self, fn):
        if fn is not None and not callable(fn):
            from ._errors import bad
            raise bad("progress: a callable (or None), not %r" % type(fn).__name__)
        self.fn, self.error = fn, None
        self.c = _lib.TUNE_PROGRESS_FN(self._call) if fn else _lib.TUNE_PROGRESS_FN()

    def _call(self, p, user):
        if self.error is not None:
            return
        q = p.contents
        try:
            self.fn(TuneProgress(q.op.decode(), q.shape.decode(), q.candidate, q.count,
                                 bool(q.done), q.best_ms))
        except BaseException as e:  # noqa: BLE001 - raised again after the C call
            self.error = e

    def run(self, check, call):
        code = call()
        if self.error is not None:
            raise self.error
        check(code)


def tune_linear(ctx, m, n, k, x_dtype="f32", w_dtype="f32", progress=None):
    sink = _Sink(progress)
    a = _lib.LinearTuneArgs(m, n, k, A.dtype_code(x_dtype), A.dtype_code(w_dtype), sink.c, None)
    sink.run(ctx._check, lambda: L.vkattn_linear_tune(ctx._h(), ctypes.byref(a)))


def tune_attention(ctx, batch, num_heads, num_kv_heads, q_len, kv_len, head_dim, causal=False,
                   q_dtype="f32", kv_dtype=None, progress=None):
    sink = _Sink(progress)
    q = A.dtype_code(q_dtype)
    kv = q if kv_dtype is None else A.dtype_code(kv_dtype)
    a = _lib.AttentionTuneArgs(batch, num_heads, num_kv_heads, q_len, kv_len, head_dim,
                               bool(causal), q, kv, sink.c, None)
    sink.run(ctx._check, lambda: L.vkattn_attention_tune(ctx._h(), ctypes.byref(a)))


def tune_layer(layer, batch, q_len, kv_len=None, progress=None):
    sink = _Sink(progress)
    a = _lib.MhaTuneArgs(batch, q_len, q_len if kv_len is None else kv_len, sink.c, None)
    sink.run(layer.ctx._check, lambda: L.vkattn_mha_tune(layer._h(), ctypes.byref(a)))


def tune_layer_step(layer, cache, batch, new_tokens, length, progress=None):
    sink = _Sink(progress)
    a = _lib.KvAttentionTuneArgs(cache._h(), batch, new_tokens, length, sink.c, None)
    sink.run(layer.ctx._check, lambda: L.vkattn_mha_step_tune(layer._h(), ctypes.byref(a)))
