"""Head masks (ctx.attention, the layer's forward and steps), pruning,
importance and size counts from Python, against numpy and the reference."""
import numpy as np
import pytest

import vkattn
from conftest import close, np_attention, randn
from test_mha import hf_state, np_mha


def test_attention_head_mask(ctx, rng):
    q, k, v = randn(rng, 2, 4, 6, 8), randn(rng, 2, 2, 9, 8), randn(rng, 2, 2, 9, 8)
    hm = np.array([[1, 0, 0.5, 2], [0, 1, 1, -1]], np.float32)
    out, w = ctx.attention(q, k, v, causal=True, head_mask=hm, need_weights=True, per_head=True)
    expect = np_attention(q, k, v, causal=True) * hm[:, :, None, None]
    close(out, expect, 2e-4)
    assert np.all(out[0, 1] == 0) and np.all(w[0, 1] == 0)
    close(vkattn.reference.attention(q, k, v, causal=True, head_mask=hm[1]),
          np_attention(q, k, v, causal=True) * hm[1][None, :, None, None], 2e-5)
    with pytest.raises(vkattn.InvalidInput, match="head_mask"):
        ctx.attention(q, k, v, head_mask=np.ones(3, np.float32))


def layer_of(ctx, rng, Dm=32, Hq=4, Hkv=2, Dh=8, **kw):
    w, sd = hf_state(rng, Dm, Hq, Hkv, Dh, True)
    layer = vkattn.MultiheadAttention(ctx, Dm, Hq, Hkv, head_dim=Dh, **kw)
    return w, layer.load_state_dict(sd, "model.layers.0.self_attn.")


def test_layer_head_mask_forward_and_steps(ctx, rng):
    w, layer = layer_of(ctx, rng)
    x = randn(rng, 2, 7, 32)
    hm = np.array([[1, 0, 2, 1], [0.5, 1, 0, 1]], np.float32)
    y = layer(x, causal=True, head_mask=hm)
    close(y, layer.reference(x, causal=True, head_mask=hm), 2e-4)
    # the mask at head level: the heads' outputs scaled before Wo
    scaled = dict(w, wo=w["wo"] * np.repeat(hm[0], 8)[None, :])
    close(y[:1], np_mha(x[:1], scaled, 4, 2, causal=True), 2e-4)
    cache = layer.kv_cache(7, batch=2)
    steps = [layer.step(x[:, :4], cache, head_mask=hm)]
    steps += [layer.step(x[:, t:t + 1], cache, head_mask=hm) for t in range(4, 7)]
    close(np.concatenate(steps, axis=1), y, 2e-4)


def test_pruned_equals_masked_and_importance(ctx, rng):
    w, layer = layer_of(ctx, rng, Hq=6, Hkv=3)
    x = randn(rng, 2, 5, 32)
    # head 4's output weights zeroed: it changes nothing, so it ranks last
    sd = {"q_proj.weight": w["wq"], "k_proj.weight": w["wk"], "v_proj.weight": w["wv"],
          "o_proj.weight": w["wo"].copy(), "q_proj.bias": w["bq"], "k_proj.bias": w["bk"],
          "v_proj.bias": w["bv"], "o_proj.bias": w["bo"]}
    sd["o_proj.weight"][:, 4 * 8:5 * 8] = 0
    layer.load_state_dict(sd)
    imp = layer.head_importance(x, causal=True)
    assert imp.shape == (6,) and imp[4] == 0 and np.argmin(imp) == 4 and np.all(imp[imp != 0] > 0)
    masked = layer(x, causal=True, head_mask=np.array([1, 0, 1, 1, 0, 1], np.float32))
    kept = layer.prune_heads([1, 4])
    assert kept == [0, 2, 3, 5]
    assert layer.spec.desc.num_heads == 4
    assert layer.state_dict()["q_proj.weight"].shape == (32, 32)
    assert layer.state_dict()["o_proj.weight"].shape == (32, 32)
    close(layer(x, causal=True), masked, 2e-5)
    close(layer.reference(x, causal=True), masked, 2e-4)
    assert layer.param_count()["wq"] == 4 * 8 * 32
    with pytest.raises(vkattn.InvalidInput, match="removes every head"):
        layer.prune_heads([0, 1, 2, 3])
    with pytest.raises(vkattn.InvalidInput, match="heads 0..3"):
        layer.prune_heads([7])


def test_param_count_and_kv_cache_bytes():
    c = vkattn.param_count(768, 12, bias=False)
    assert c["total"] == 2359296 == 4 * 768 * 768
    assert c["wq"] == c["wk"] == c["wv"] == c["wo"] == 589824 and c["biases"] == 0
    assert c["bytes"] == 4 * 2359296
    # torch's add_bias_kv rows count as its parameters() counts them
    t = vkattn.param_count(768, 12, add_bias_kv=True)
    assert t["bias_k"] == t["bias_v"] == 768 and t["total"] == 2362368 + 1536
    g = vkattn.param_count(4096, 32, 8, bias=True, weight_dtype="q8_0")
    assert g["wk"] == 8 * 128 * 4096 and g["biases"] == 4096 + 1024 + 1024 + 4096
    assert g["bytes"] == 41943040 // 32 * 34 + 4 * 10240
    assert vkattn.kv_cache_bytes(32, 8, 128, dtype="f16")[0] == 2 * 8 * 128 * 2
    assert vkattn.kv_cache_bytes(32, 1, 128, dtype="q8_0")[0] == 2 * 4 * 34
    for name, block in (("q4_1", 20), ("q5_0", 22), ("q5_1", 24), ("iq4_nl", 18)):
        assert vkattn.kv_cache_bytes(32, 1, 128, dtype=name)[0] == 2 * 4 * block
    assert vkattn.kv_cache_bytes(12, 12, 64, dtype="f32", context=100)[1] >= 100 * 6144
    with pytest.raises(vkattn.InvalidInput, match="num_heads"):
        vkattn.param_count(768, 7)
