"""The tuners from Python with a progress callable: candidates reported
1..count in order and each op's end, a layer's several ops, the same
results with and without it; an exception in the callable comes back as
itself after the tuner returns, with the interpreter alive."""
import numpy as np
import pytest

import vkattn
from conftest import randn


def collect():
    calls = []
    return calls, calls.append


def check_sequence(calls):
    """Per op: candidates 1..count, then done; returns the ops in order."""
    ops, expect = [], 1
    for p in calls:
        assert p.count > 0 and p.shape and p.op in ("linear", "attention", "kv_attention")
        if p.done:
            assert p.candidate == p.count == expect - 1 and p.best_ms > 0, p
            ops.append(p.op)
            expect = 1
        else:
            assert p.candidate == expect, p
            expect += 1
    assert expect == 1, "a measurement did not end"
    return ops


def test_tune_attention_and_linear(ctx):
    calls, fn = collect()
    ctx.tune_attention(1, 2, 1, 8, 8, 16, causal=True, progress=fn)
    assert check_sequence(calls) == ["attention"]
    assert "hq=2 hkv=1 tq=8 tk=8 d=16 causal" in calls[0].shape
    calls.clear()
    ctx.tune_linear(4, 64, 32, progress=fn)
    assert check_sequence(calls) == ["linear"]
    ctx.tune_linear(4, 64, 32)  # no callable


def test_layer_tuners_report_each_op(ctx, rng):
    layer = vkattn.MultiheadAttention(ctx, 64, 2, num_kv_heads=1, bias=False)
    w = {"q_proj.weight": randn(rng, 64, 64) * 0.1, "k_proj.weight": randn(rng, 32, 64) * 0.1,
         "v_proj.weight": randn(rng, 32, 64) * 0.1, "o_proj.weight": randn(rng, 64, 64) * 0.1}
    layer.load_state_dict(w)
    x = randn(rng, 1, 8, 64)
    before = layer(x, causal=True)
    calls, fn = collect()
    layer.tune(1, 8, progress=fn)
    assert check_sequence(calls) == ["linear", "attention", "attention", "linear"]
    np.testing.assert_allclose(layer(x, causal=True), before, atol=2e-4)
    cache = layer.kv_cache(32)
    calls.clear()
    layer.tune_step(cache, 1, 1, 32, progress=fn)
    assert check_sequence(calls) == ["kv_attention", "linear", "linear"]


def test_exception_in_the_callable(ctx):
    class Stop(Exception):
        pass

    seen = []

    def boom(p):
        seen.append(p)
        raise Stop("from the callable")

    with pytest.raises(Stop, match="from the callable"):
        ctx.tune_attention(1, 2, 2, 8, 8, 16, progress=boom)
    assert len(seen) == 1  # later calls skipped
    with pytest.raises(vkattn.InvalidInput, match="progress: a callable"):
        ctx.tune_linear(4, 64, 32, progress=3)
    ctx.tune_linear(4, 64, 32)  # the context still works
