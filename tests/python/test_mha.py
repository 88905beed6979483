"""MultiheadAttention: state dicts with PyTorch's and Hugging Face's names
against a numpy formula (and torch.nn.MultiheadAttention when importable),
the reference, and KV-cache steps against the causal forward."""
import numpy as np
import pytest

import vkattn
from conftest import close, np_attention, randn


def np_mha(x, w, Hq, Hkv, kv=None, causal=False, mask=None, value=None):
    c = x if kv is None else kv
    cv = c if value is None else value
    lin = lambda a, W, b: a @ W.T + (0 if b is None else b)  # noqa: E731
    Q = lin(x, w["wq"], w.get("bq"))
    K, V = lin(c, w["wk"], w.get("bk")), lin(cv, w["wv"], w.get("bv"))
    B, Tq, _ = x.shape
    Tk = c.shape[1]
    Dh, Dv = Q.shape[-1] // Hq, V.shape[-1] // Hkv
    heads = lambda a, T, H, D: a.reshape(B, T, H, D).transpose(0, 2, 1, 3)  # noqa: E731
    o = np_attention(heads(Q, Tq, Hq, Dh), heads(K, Tk, Hkv, Dh), heads(V, Tk, Hkv, Dv),
                     causal=causal, mask=mask)
    o = o.transpose(0, 2, 1, 3).reshape(B, Tq, Hq * Dv)
    return lin(o, w["wo"], w.get("bo"))


def hf_state(rng, Dm, Hq, Hkv, Dh, bias, Dkv=None, Dv=None, Dvin=None):
    Dkv, Dv = Dkv or Dm, Dv or Dh
    Dvin = Dvin or Dkv
    w = {"wq": randn(rng, Hq * Dh, Dm) * 0.2, "wk": randn(rng, Hkv * Dh, Dkv) * 0.2,
         "wv": randn(rng, Hkv * Dv, Dvin) * 0.2, "wo": randn(rng, Dm, Hq * Dv) * 0.2}
    if bias:
        w.update(bq=randn(rng, Hq * Dh), bk=randn(rng, Hkv * Dh), bv=randn(rng, Hkv * Dv),
                 bo=randn(rng, Dm))
    names = {"wq": "q_proj.weight", "wk": "k_proj.weight", "wv": "v_proj.weight",
             "wo": "o_proj.weight", "bq": "q_proj.bias", "bk": "k_proj.bias",
             "bv": "v_proj.bias", "bo": "o_proj.bias"}
    return w, {"model.layers.0.self_attn." + names[k]: a for k, a in w.items()}


def test_torch_names_packed(ctx, rng):
    Dm, H = 32, 4
    w, _ = hf_state(rng, Dm, H, H, 8, True)
    sd = {"in_proj_weight": np.concatenate([w["wq"], w["wk"], w["wv"]]),
          "in_proj_bias": np.concatenate([w["bq"], w["bk"], w["bv"]]),
          "out_proj.weight": w["wo"], "out_proj.bias": w["bo"]}
    layer = vkattn.MultiheadAttention(ctx, Dm, H).load_state_dict(sd)
    x = randn(rng, 2, 7, Dm)
    mask = rng.random((7, 7)) < 0.3  # torch MHA: True = not allowed
    np.fill_diagonal(mask, False)
    expect = np_mha(x, w, H, H, mask=np.where(mask, -np.inf, 0.0))
    close(layer(x, mask=mask), expect, 2e-4)
    close(layer.reference(x, mask=mask), expect, 2e-5)
    close(vkattn.reference.mha(x, sd, embed_dim=Dm, num_heads=H, mask=mask), expect, 2e-5)


def test_torch_names_cross_attention_kdim(ctx, rng):
    Dm, Dkv, H = 32, 24, 2
    w, _ = hf_state(rng, Dm, H, H, 16, True, Dkv)
    sd = {"q_proj_weight": w["wq"], "k_proj_weight": w["wk"], "v_proj_weight": w["wv"],
          "in_proj_bias": np.concatenate([w["bq"], w["bk"], w["bv"]]),
          "out_proj.weight": w["wo"], "out_proj.bias": w["bo"]}
    layer = vkattn.MultiheadAttention(ctx, Dm, H, kdim=Dkv).load_state_dict(sd)
    x, c = randn(rng, 2, 5, Dm), randn(rng, 2, 11, Dkv)
    pad = np.zeros((2, 11), dtype=bool)
    pad[1, 8:] = True  # torch: True = ignore
    y, wts = layer(x, kv=c, key_padding_mask=pad, need_weights=True)
    expect = np_mha(x, w, H, H, kv=c, mask=np.where(pad, -np.inf, 0.0)[:, None, None, :])
    close(y, expect, 2e-4)
    assert wts.shape == (2, 5, 11) and np.allclose(wts.sum(-1), 1, atol=1e-5)
    assert np.all(wts[1, :, 8:] == 0)


@pytest.mark.parametrize("dtype,tol", [("f32", 2e-4), ("f16", 1.5e-2)])
def test_key_and_value_apart(ctx, rng, dtype, tol):
    """torch's layer(query, key, value) with kdim 24 and vdim 40."""
    Dm, Dkv, Dvin, H = 32, 24, 40, 4
    w, _ = hf_state(rng, Dm, H, H, 8, True, Dkv, Dvin=Dvin)
    sd = {"q_proj_weight": w["wq"], "k_proj_weight": w["wk"], "v_proj_weight": w["wv"],
          "in_proj_bias": np.concatenate([w["bq"], w["bk"], w["bv"]]),
          "out_proj.weight": w["wo"], "out_proj.bias": w["bo"]}
    layer = vkattn.MultiheadAttention(ctx, Dm, H, kdim=Dkv, vdim=Dvin, dtype=dtype)
    layer.load_state_dict(sd)
    x, k, v = randn(rng, 2, 5, Dm), randn(rng, 2, 9, Dkv), randn(rng, 2, 9, Dvin)
    pad = np.zeros((2, 9), dtype=bool)
    pad[0, 6:] = True
    expect = np_mha(x, w, H, H, kv=k, value=v, mask=np.where(pad, -np.inf, 0.0)[:, None, None, :])
    close(layer(x, k, v, key_padding_mask=pad), expect, tol)
    close(layer.reference(x, k, v, key_padding_mask=pad), expect, 2e-5)
    close(vkattn.reference.mha(x, sd, embed_dim=Dm, num_heads=H, kdim=Dkv, vdim=Dvin, kv=k,
                               value=v, key_padding_mask=pad), expect, 2e-5)
    with pytest.raises(vkattn.Error, match="value_dim 40 differs from its kv_dim 24"):
        layer(x, k)
    try:
        import torch
    except ImportError:
        return
    m = torch.nn.MultiheadAttention(Dm, H, batch_first=True, kdim=Dkv, vdim=Dvin).eval()
    m.load_state_dict({n: torch.from_numpy(np.asarray(a, np.float32)) for n, a in sd.items()})
    t = lambda a: torch.from_numpy(a.astype(np.float32))  # noqa: E731
    ty = m(t(x), t(k), t(v), key_padding_mask=torch.from_numpy(pad))[0].detach().numpy()
    close(layer(x, k, v, key_padding_mask=pad), ty, tol)


@pytest.mark.parametrize("dtype,tol", [("f32", 2e-4), ("f16", 2e-2)])
def test_hf_names_gqa(ctx, rng, dtype, tol):
    Dm, Hq, Hkv, Dh = 64, 8, 2, 8
    w, sd = hf_state(rng, Dm, Hq, Hkv, Dh, False)
    layer = vkattn.MultiheadAttention(ctx, Dm, Hq, num_kv_heads=Hkv, bias=False, dtype=dtype)
    layer.load_state_dict(sd, prefix="model.layers.0.self_attn.")
    x = randn(rng, 1, 9, Dm)
    y = layer(x, causal=True)
    assert y.dtype == (np.float16 if dtype == "f16" else np.float32)
    close(y, np_mha(x, w, Hq, Hkv, causal=True), tol)


def test_against_torch_multihead_attention(ctx, rng):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    Dm, H = 32, 4
    m = torch.nn.MultiheadAttention(Dm, H, batch_first=True).eval()
    with torch.no_grad():
        m.in_proj_bias.normal_()
        m.out_proj.bias.normal_()
    layer = vkattn.MultiheadAttention(ctx, Dm, H).load_state_dict(m.state_dict())
    x = torch.from_numpy(randn(rng, 2, 6, Dm))
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[0, 4:] = True
    causal = torch.triu(torch.ones(6, 6, dtype=torch.bool), diagonal=1)
    with torch.no_grad():
        ty, tw = m(x, x, x, key_padding_mask=pad, attn_mask=causal, need_weights=True)
    y, w = layer(x, key_padding_mask=pad, mask=causal, need_weights=True)
    close(y, ty.numpy(), 2e-4)
    close(w, tw.numpy(), 2e-4)
    close(layer(x, causal=True), m(x, x, x, attn_mask=causal)[0].detach().numpy(), 2e-4)


@pytest.mark.parametrize("paged_block", [0, 4])
def test_kv_cache_steps_equal_causal_forward(ctx, rng, paged_block):
    Dm, Hq, Hkv = 32, 4, 2
    w, sd = hf_state(rng, Dm, Hq, Hkv, 8, True)
    layer = vkattn.MultiheadAttention(ctx, Dm, Hq, num_kv_heads=Hkv)
    layer.load_state_dict(sd, prefix="model.layers.0.self_attn.")
    x = randn(rng, 2, 10, Dm)
    full = layer(x, causal=True)
    close(full, np_mha(x, w, Hq, Hkv, causal=True), 2e-4)
    cache = layer.kv_cache(16, batch=2, paged_block=paged_block)
    ys = [layer.step(x[:, :6], cache)]
    for t in range(6, 10):
        ys.append(layer.step(x[:, t:t + 1], cache))
    assert cache.length(0) == 10 and cache.length(1) == 10
    close(np.concatenate(ys, axis=1), full, 2e-4)
    # one sequence alone, after a reset of it, on device inputs
    cache.truncate(1, 0)
    y1 = layer.step(ctx.tensor(x[1:2, :10]), cache, sequences=[1])
    close(y1, full[1:2], 2e-4)
    cache.reset()
    assert cache.length(0) == 0


@pytest.mark.parametrize("Dh,Dv", [(24, 16), (5, 21)])
def test_v_head_dim_of_its_own(ctx, rng, Dh, Dv):
    # DeepSeek-style heads: V's head dim apart from Q/K's (and sizes that
    # are not multiples of 8), forward and KV-cache steps
    Dm, Hq, Hkv = 32, 4, 1
    w, sd = hf_state(rng, Dm, Hq, Hkv, Dh, True, Dv=Dv)
    layer = vkattn.MultiheadAttention(ctx, Dm, Hq, num_kv_heads=Hkv, head_dim=Dh, v_head_dim=Dv)
    layer.load_state_dict(sd, prefix="model.layers.0.self_attn.")
    x = randn(rng, 1, 9, Dm)
    full = layer(x, causal=True)
    expect = np_mha(x, w, Hq, Hkv, causal=True)
    close(full, expect, 2e-4)
    close(vkattn.reference.mha(x, sd_strip(sd), embed_dim=Dm, num_heads=Hq, num_kv_heads=Hkv,
                               head_dim=Dh, v_head_dim=Dv, causal=True), expect, 2e-5)
    cache = layer.kv_cache(12)
    ys = [layer.step(x[:, :5], cache)] + [layer.step(x[:, t:t + 1], cache) for t in range(5, 9)]
    close(np.concatenate(ys, axis=1), full, 2e-4)


def sd_strip(sd, prefix="model.layers.0.self_attn."):
    return {k[len(prefix):]: v for k, v in sd.items()}


def test_decode_loop_reuses_device_tensors(ctx, rng):
    Dm, H = 32, 4
    w, sd = hf_state(rng, Dm, H, H, 8, False)
    layer = vkattn.MultiheadAttention(ctx, Dm, H, bias=False).load_state_dict(
        sd, prefix="model.layers.0.self_attn.")
    x = randn(rng, 1, 8, Dm)
    cache = layer.kv_cache(8)
    xt = [ctx.tensor(x[:, t:t + 1]) for t in range(8)]
    ys = [layer.step(t, cache) for t in xt]
    close(np.concatenate(ys, axis=1), np_mha(x, w, H, H, causal=True), 2e-4)


@pytest.mark.parametrize("opts", [
    dict(rope_theta=10000.0, qk_norm=True),
    dict(rope_theta=500000.0, rope_style="gptj", window=5, softcap=30.0,
         rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                       "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    dict(sinks=True, alibi_max_bias=8.0),
])
def test_modern_decoder_layer(ctx, rng, opts):
    Dm, Hq, Hkv, Dh = 32, 4, 2, 8
    w, sd = hf_state(rng, Dm, Hq, Hkv, Dh, False)
    sd = {k.split("self_attn.")[1]: v for k, v in sd.items()}
    if opts.get("qk_norm"):
        sd["q_norm.weight"] = 1 + 0.1 * randn(rng, Dh)
        sd["k_norm.weight"] = 1 + 0.1 * randn(rng, Dh)
    if opts.get("sinks"):
        sd["sinks"] = randn(rng, Hq)
    layer = vkattn.MultiheadAttention(ctx, Dm, Hq, num_kv_heads=Hkv, bias=False, **opts)
    layer.load_state_dict(sd)
    x = randn(rng, 2, 9, Dm)
    full = layer(x, causal=True)
    close(full, layer.reference(x, causal=True), 2e-4)
    close(full, vkattn.reference.mha(x, sd, embed_dim=Dm, num_heads=Hq, num_kv_heads=Hkv,
                                     bias=False, causal=True, **opts), 2e-4)
    pos = np.tile(np.arange(3, 12, dtype=np.int32), (2, 1))
    if opts.get("rope_theta"):
        close(layer(x, causal=True, positions=pos),
              layer.reference(x, causal=True, positions=pos), 2e-4)
    cache = layer.kv_cache(16, batch=2, paged_block=4 if opts.get("window") else 0)
    ys = [layer.step(x[:, :5], cache)] + [layer.step(x[:, t:t + 1], cache) for t in range(5, 9)]
    close(np.concatenate(ys, axis=1), full, 2e-4)
    assert set(layer.state_dict()) == set(sd)


@pytest.mark.parametrize("weight_dtype", ["q8_0", "bf16"])
def test_weight_dtype_and_quantized_cache(ctx, rng, weight_dtype):
    """weight_dtype keeps the weights in q8_0 / bf16 on the device: equal to
    the reference that converts them alike, near the f32 formula; steps over
    q8_0, q5_1 and iq4_nl caches stay near the forward (within each
    format's own error)."""
    Dm, Hq, Hkv, Dh = 128, 4, 2, 64
    w, sd = hf_state(rng, Dm, Hq, Hkv, Dh, True)
    sd = {k.split("self_attn.")[1]: v for k, v in sd.items()}
    layer = vkattn.MultiheadAttention(ctx, Dm, Hq, num_kv_heads=Hkv, head_dim=Dh,
                                      weight_dtype=weight_dtype).load_state_dict(sd)
    x = randn(rng, 1, 6, Dm)
    y = layer(x, causal=True)
    ref = vkattn.reference.mha(x, sd, embed_dim=Dm, num_heads=Hq, num_kv_heads=Hkv,
                               head_dim=Dh, causal=True, weight_dtype=weight_dtype)
    close(y, ref, 2e-4)
    close(y, np_mha(x, w, Hq, Hkv, causal=True), 3e-2)  # the format's own error
    # within each format's own error on these randn activations (q5_1: 0.07-0.08)
    for cache_dtype, tol in (("q8_0", 2e-2), ("q5_1", 0.15), ("iq4_nl", 0.3)):
        cache = layer.kv_cache(8, dtype=cache_dtype)
        ys = [layer.step(x[:, :4], cache), layer.step(x[:, 4:5], cache),
              layer.step(x[:, 5:6], cache)]
        close(np.concatenate(ys, axis=1), y, tol)
    with pytest.raises(ValueError):
        vkattn.MultiheadAttention(ctx, Dm, Hq, weight_dtype="q4_0")
    with pytest.raises(ValueError):
        layer.kv_cache(8, dtype="f64")
