"""Context.attention against vkattn.reference and a numpy float64 formula."""
import numpy as np
import pytest

import vkattn
from conftest import close, np_attention, randn


def qkv(rng, B=2, Hq=4, Hkv=2, Tq=5, Tk=9, D=16):
    return randn(rng, B, Hq, Tq, D), randn(rng, B, Hkv, Tk, D), randn(rng, B, Hkv, Tk, D)


@pytest.mark.parametrize("Hkv", [4, 2, 1])
@pytest.mark.parametrize("causal", [False, True])
def test_gqa_causal(ctx, rng, Hkv, causal):
    q, k, v = qkv(rng, Hkv=Hkv)
    out = ctx.attention(q, k, v, causal=causal)
    assert out.dtype == np.float32 and out.shape == (2, 4, 5, 16)
    close(out, np_attention(q, k, v, causal=causal), 2e-5)
    close(out, vkattn.reference.attention(q, k, v, causal=causal), 2e-5)


@pytest.mark.parametrize("dk,dv", [(16, 40), (5, 21), (576, 512)])
def test_head_dims(ctx, rng, dk, dv):
    """v's head dim may differ from q/k's, up to 576, any size (MLA's 576/512)."""
    q, k = randn(rng, 1, 2, 3, dk), randn(rng, 1, 1, 6, dk)
    v = randn(rng, 1, 1, 6, dv)
    out = ctx.attention(q, k, v, causal=True)
    assert out.shape == (1, 2, 3, dv)
    close(out, np_attention(q, k, v, causal=True), 2e-5)
    close(out, vkattn.reference.attention(q, k, v, causal=True), 2e-5)


@pytest.mark.parametrize("layout", ["bhtd", "bthd"])
def test_query_broadcast_over_batch(ctx, rng, layout):
    """q [Hq, Tq, D] ("bthd": [Tq, Hq, D]) serves every batch row of k and v."""
    q3, k, v = randn(rng, 4, 5, 16), randn(rng, 3, 2, 9, 16), randn(rng, 3, 2, 9, 16)
    q4 = np.broadcast_to(q3, (3,) + q3.shape).copy()
    if layout == "bthd":
        q3, q4 = q3.transpose(1, 0, 2).copy(), q4.transpose(0, 2, 1, 3).copy()
        k, v = k.transpose(0, 2, 1, 3).copy(), v.transpose(0, 2, 1, 3).copy()
    out = ctx.attention(q3, k, v, causal=True, layout=layout)
    want = ctx.attention(q4, k, v, causal=True, layout=layout)
    assert out.shape == want.shape
    assert np.array_equal(out, want)
    close(out, vkattn.reference.attention(q3, k, v, causal=True, layout=layout), 2e-5)


@pytest.mark.parametrize("shape", [(5, 9), (1, 9), (5, 1), (2, 1, 1, 9), (1, 1, 5, 9),
                                   (8, 5, 9), (1, 5, 9)])
def test_float_mask_broadcast(ctx, rng, shape):
    q, k, v = qkv(rng)
    mask = randn(rng, *shape)
    mask[..., 0] = -np.inf
    out = ctx.attention(q, k, v, mask=mask, scale=0.3)
    full = mask if len(shape) != 3 else np.broadcast_to(mask, (8, 5, 9)).reshape(2, 4, 5, 9)
    close(out, np_attention(q, k, v, mask=full, scale=0.3), 2e-5)
    close(out, vkattn.reference.attention(q, k, v, mask=mask, scale=0.3), 2e-5)


@pytest.mark.parametrize("shape", [(5, 9), (2, 1, 1, 9), (1, 4, 5, 9)])
def test_bool_mask_both_meanings(ctx, rng, shape):
    q, k, v = qkv(rng)
    attend = rng.random(shape) > 0.4
    attend[..., 1] = True
    additive = np.where(attend, 0.0, -np.inf)
    expect = np_attention(q, k, v, mask=additive)
    close(ctx.attention(q, k, v, mask=attend), expect, 2e-5)  # SDPA: True = attend
    close(ctx.attention(q, k, v, mask=~attend, mask_true_blocks=True), expect, 2e-5)
    close(ctx.attention(q, k, v, mask=attend.astype(np.uint8)), expect, 2e-5)
    close(vkattn.reference.attention(q, k, v, mask=~attend, mask_true_blocks=True), expect, 2e-5)


def test_key_padding_both_conventions(ctx, rng):
    q, k, v = qkv(rng)
    tokens = np.ones((2, 9), dtype=np.uint8)
    tokens[0, 6:] = 0
    tokens[1, :2] = 0
    additive = np.where(tokens[:, None, None, :] == 1, 0.0, -np.inf)
    expect = np_attention(q, k, v, mask=additive)
    close(ctx.attention(q, k, v, key_padding=tokens), expect, 2e-5)
    close(ctx.attention(q, k, v, key_padding_mask=tokens == 0), expect, 2e-5)
    close(vkattn.reference.attention(q, k, v, key_padding_mask=tokens == 0), expect, 2e-5)
    with pytest.raises(ValueError):
        ctx.attention(q, k, v, key_padding=tokens, key_padding_mask=tokens == 0)


def test_fully_masked_rows_are_zero(ctx, rng):
    q, k, v = qkv(rng)
    mask = np.ones((5, 9), dtype=bool)
    mask[2] = False
    out = ctx.attention(q, k, v, mask=mask)
    assert np.all(out[:, :, 2] == 0) and np.all(np.isfinite(out))


@pytest.mark.parametrize("per_head", [False, True])
def test_weights_and_lse(ctx, rng, per_head):
    q, k, v = qkv(rng)
    out, w, lse = ctx.attention(q, k, v, causal=True, need_weights=True, per_head=per_head,
                                return_lse=True)
    eo, ep = np_attention(q, k, v, causal=True, weights=True)
    close(out, eo, 2e-5)
    close(w, ep if per_head else ep.mean(axis=1), 2e-5)
    rw, rl = vkattn.reference.attention(q, k, v, causal=True, need_weights=True,
                                        per_head=per_head, return_lse=True)[1:]
    close(w, rw, 2e-5)
    close(lse, rl, 2e-5)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_dtypes(ctx, rng, dtype):
    q, k, v = qkv(rng)
    out = ctx.attention(q, k, v, causal=True, dtype=dtype)
    assert out.dtype == (np.float16 if dtype == "f16" else np.float32)
    ref = vkattn.reference.attention(q, k, v, causal=True, dtype=dtype)
    close(out, ref, 1e-2)
    close(out, np_attention(q, k, v, causal=True), 3e-2)


def test_bthd_layout(ctx, rng):
    q, k, v = qkv(rng)
    t = (0, 2, 1, 3)
    out = ctx.attention(q.transpose(t), k.transpose(t), v.transpose(t), layout="bthd",
                        causal=True)
    assert out.shape == (2, 5, 4, 16)
    close(out.transpose(t), np_attention(q, k, v, causal=True), 2e-5)


def test_score_modifiers_match_reference(ctx, rng):
    q, k, v = qkv(rng)
    kw = dict(causal=True, window=4, softcap=5.0, sinks=randn(rng, 4), alibi_max_bias=8.0)
    close(ctx.attention(q, k, v, **kw), vkattn.reference.attention(q, k, v, **kw), 2e-5)
    close(ctx.attention(q, k, v, causal=True, causal_top_left=True),
          vkattn.reference.attention(q, k, v, causal=True, causal_top_left=True), 2e-5)


def test_device_tensors_reused(ctx, rng):
    q, k, v = qkv(rng)
    kt, vt = ctx.tensor(k), ctx.tensor(v)
    assert np.array_equal(kt.numpy(), k) and kt.shape == k.shape and kt.dtype == "f32"
    for _ in range(3):
        q = randn(rng, 2, 4, 5, 16)
        close(ctx.attention(ctx.tensor(q), kt, vt), np_attention(q, k, v), 2e-5)
    mt = ctx.tensor(np.zeros((5, 9)), "f32")
    close(ctx.attention(q, kt, vt, mask=mt), np_attention(q, k, v), 2e-5)
    h = ctx.tensor(q, "f16")
    assert h.numpy().dtype == np.float16


def test_torch_tensors_accepted(ctx, rng):
    torch = pytest.importorskip("torch")
    q, k, v = qkv(rng, Hkv=4)
    out = ctx.attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v),
                        causal=True, causal_top_left=True)
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    if sdpa is None:  # torch 1.13: no SDPA
        expect = np_attention(q, k, v, causal=True)  # Tq < Tk: not the same as top-left
        i = np.arange(5)[:, None]
        j = np.arange(9)[None, :]
        expect = np_attention(q, k, v, mask=np.where(j <= i, 0.0, -np.inf))
    else:
        expect = sdpa(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v),
                      is_causal=True).numpy()
    close(out, expect, 2e-5)
