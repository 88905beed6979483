"""Bad input raises vkattn.Error / ValueError with the library's message and
never crashes the interpreter; objects keep their context alive."""
import gc

import numpy as np
import pytest

import vkattn
from conftest import randn


def test_wrong_head_count_has_library_message(ctx, rng):
    q, k, v = randn(rng, 1, 3, 4, 16), randn(rng, 1, 2, 4, 16), randn(rng, 1, 2, 4, 16)
    with pytest.raises(ValueError) as e:
        ctx.attention(q, k, v)
    assert isinstance(e.value, vkattn.Error)
    assert e.value.name == "VKATTN_ERROR_SHAPE_MISMATCH" or e.value.code < 0
    msg = str(e.value)
    assert "3" in msg and "2" in msg and msg.startswith("VKATTN_ERROR_"), msg
    assert msg.split(": ", 1)[1] == ctx.last_error() or ctx.last_error() in msg
    with pytest.raises(ValueError) as r:
        vkattn.reference.attention(q, k, v)
    assert "3" in str(r.value) and "2" in str(r.value)


@pytest.mark.parametrize("bad", [
    dict(q=np.zeros((4, 16), np.float32)),               # rank 2
    dict(q=np.zeros((1, 1, 1, 1, 16), np.float32)),      # rank 5
    dict(q=np.zeros((1, 2, 4, 12), np.float32)),         # q/k head dims 12 and 16 differ
    dict(q=np.array([["a"]], dtype=object)),
    dict(mask=np.zeros((1, 1, 1, 1, 4), np.float32)),    # rank 5 mask
    dict(mask=np.zeros((3, 5), np.float32)),             # does not broadcast
    dict(mask=np.zeros((4, 4), np.int64)),               # int mask: ambiguous
    dict(key_padding=np.ones((2, 4))),                   # batch 2 for B = 1
    dict(sinks=np.zeros(3, np.float32)),                 # [Hq] is [2]
    dict(dtype="f64"),
    dict(window=-1),
])
def test_bad_attention_input_is_value_error(ctx, bad):
    kw = dict(q=np.zeros((1, 2, 4, 16), np.float32), k=np.zeros((1, 2, 4, 16), np.float32),
              v=np.zeros((1, 2, 4, 16), np.float32))
    kw.update(bad)
    for call in (ctx.attention, vkattn.reference.attention):
        with pytest.raises(ValueError) as e:
            call(**kw)
        assert isinstance(e.value, vkattn.Error) and str(e.value)


def test_bad_layer_input(ctx, rng):
    with pytest.raises(ValueError, match="num_kv_heads 3 does not divide num_heads 4"):
        vkattn.MultiheadAttention(ctx, 32, 4, num_kv_heads=3)
    layer = vkattn.MultiheadAttention(ctx, 32, 4)
    with pytest.raises(vkattn.Error, match="load_state_dict"):
        layer(randn(rng, 1, 2, 32))
    good = {"q_proj.weight": np.zeros((32, 32)), "k_proj.weight": np.zeros((32, 32)),
            "v_proj.weight": np.zeros((32, 32)), "o_proj.weight": np.zeros((32, 32))}
    with pytest.raises(ValueError, match="shape"):
        layer.load_state_dict(dict(good, **{"k_proj.weight": np.zeros((16, 32))}))
    with pytest.raises(ValueError, match="unknown names"):
        layer.load_state_dict(dict(good, bogus=np.zeros(3)))
    with pytest.raises(ValueError, match="no o weight|no wo|o_proj"):
        layer.load_state_dict({k: v for k, v in good.items() if k != "o_proj.weight"})
    layer.load_state_dict(good)
    with pytest.raises(ValueError):
        layer(randn(rng, 1, 2, 24))  # embed_dim 32
    cache = layer.kv_cache(4)
    with pytest.raises(ValueError):
        layer.step(randn(rng, 1, 5, 32), cache)  # over the capacity
    with pytest.raises(ValueError):
        layer.step(randn(rng, 1, 1, 32), cache, sequences=[3])


def test_context_errors_and_lifetime(rng):
    with pytest.raises(vkattn.Error) as e:
        vkattn.Context(device="no such device anywhere")
    assert "no such device" in str(e.value) or e.value.name == "VKATTN_ERROR_DEVICE_NOT_FOUND"
    ctx = vkattn.Context()
    t = ctx.tensor(randn(rng, 2, 8))
    layer = vkattn.MultiheadAttention(ctx, 16, 2)
    del ctx
    gc.collect()
    assert t.numpy().shape == (2, 8)  # the tensor keeps its context
    c = t.ctx
    c.close()
    with pytest.raises(vkattn.Error):
        t.numpy()
    with pytest.raises(vkattn.Error):
        layer.kv_cache(4)
    c.close()  # twice is fine


def test_devices():
    devs = vkattn.devices()
    assert devs and all("name" in d for d in devs)
    assert sum(d["chosen"] for d in devs) == 1
    with vkattn.Context(device=0) as c:
        assert c.device["name"] == devs[0]["name"]


def test_calls_free_what_they_allocate(ctx, rng):
    """Every call's buffers are destroyed when it returns, failed calls too."""
    import gc as _gc
    q, k, v = randn(rng, 1, 2, 4, 16), randn(rng, 1, 2, 4, 16), randn(rng, 1, 2, 4, 16)
    _gc.collect()
    before = len(ctx._objects)
    for _ in range(3):
        ctx.attention(q, k, v, need_weights=True, return_lse=True, mask=np.zeros((4, 4)))
        with pytest.raises(ValueError):
            ctx.attention(q, k[:, :1, :3], v)
    layer = vkattn.MultiheadAttention(ctx, 32, 4, bias=False)
    layer.load_state_dict({n: randn(rng, 32, 32) for n in
                           ("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight")})
    cache = layer.kv_cache(8)
    layer(randn(rng, 1, 3, 32), need_weights=True)
    layer.step(randn(rng, 1, 3, 32), cache)
    del layer, cache
    _gc.collect()
    assert len(ctx._objects) == before


def test_integers_are_range_checked_not_wrapped(ctx, rng):
    q = randn(rng, 1, 2, 4, 16)
    with pytest.raises(ValueError, match="window"):
        ctx.attention(q, q, q, window=2 ** 32)
    with pytest.raises(ValueError, match="num_heads"):
        vkattn.MultiheadAttention(ctx, 32, -4)
    layer = vkattn.MultiheadAttention(ctx, 32, 4)
    cache = layer.kv_cache(4)
    with pytest.raises(ValueError, match="sequence"):
        cache.length(-1)
    with pytest.raises(ValueError):
        cache.length(5)  # the library's check
    with pytest.raises(ValueError, match="max_tokens"):
        layer.kv_cache(2 ** 33)
