"""cu_seqlens / cu_seqlens_k: packed ragged batches (FlashAttention's varlen
form) against each sequence run alone, the reference and numpy; offsets in
every accepted type; the refusals, by name."""
import numpy as np
import pytest

import vkattn
from conftest import close, np_attention, randn

LENGTHS = [9, 0, 33, 17]  # an empty sequence among them


def offsets(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


def packed_qkv(rng, tq, tk=None, Hq=4, Hkv=2, D=32):
    tk = tq if tk is None else tk
    return (randn(rng, 1, Hq, sum(tq), D), randn(rng, 1, Hkv, sum(tk), D),
            randn(rng, 1, Hkv, sum(tk), D))


def each_sequence(cu_q, cu_k):
    """(i, query slice, key slice) of every sequence with queries."""
    for i in range(len(cu_q) - 1):
        if cu_q[i + 1] > cu_q[i]:
            yield i, slice(cu_q[i], cu_q[i + 1]), slice(cu_k[i], cu_k[i + 1])


def test_self_attention_gqa_causal(ctx, rng):
    """Each sequence as it is alone: out, lse, and the reference's packed call."""
    cu = offsets(LENGTHS)
    q, k, v = packed_qkv(rng, LENGTHS)
    out, lse = ctx.attention(q, k, v, causal=True, cu_seqlens=cu, return_lse=True)
    assert out.shape == (1, 4, 59, 32) and lse.shape == (1, 4, 59)
    for _, sq, sk in each_sequence(cu, cu):
        o1, l1 = ctx.attention(q[:, :, sq], k[:, :, sk], v[:, :, sk], causal=True,
                               return_lse=True)
        close(out[:, :, sq], o1, 2e-4)
        close(lse[:, :, sq], l1, 2e-4)
        close(out[:, :, sq], np_attention(q[:, :, sq], k[:, :, sk], v[:, :, sk], causal=True),
              2e-4)
    ro, rl = vkattn.reference.attention(q, k, v, causal=True, cu_seqlens=cu, return_lse=True)
    close(out, ro, 2e-4)
    close(lse, rl, 2e-4)


def test_cross_attention(ctx, rng):
    """cu_seqlens_k: each sequence's own keys; causal aligned bottom-right per sequence."""
    tq, tk = [3, 6, 1], [7, 2, 12]
    cu_q, cu_k = offsets(tq), offsets(tk)
    q, k, v = packed_qkv(rng, tq, tk)
    for causal in (False, True):
        out = ctx.attention(q, k, v, causal=causal, cu_seqlens=cu_q, cu_seqlens_k=cu_k)
        assert out.shape == (1, 4, 10, 32)
        for _, sq, sk in each_sequence(cu_q, cu_k):
            close(out[:, :, sq], np_attention(q[:, :, sq], k[:, :, sk], v[:, :, sk],
                                              causal=causal), 2e-4)
        close(out, vkattn.reference.attention(q, k, v, causal=causal, cu_seqlens=cu_q,
                                              cu_seqlens_k=cu_k), 2e-4)


def test_flash_attn_layout(ctx, rng):
    """layout="bthd" with [total, H, D] operands (flash_attn_varlen_func's):
    out [total, Hq, D], lse [Hq, total]; the same as the [1, H, T, D] call."""
    cu = offsets(LENGTHS)
    q, k, v = packed_qkv(rng, LENGTHS)
    want, want_lse = ctx.attention(q, k, v, causal=True, cu_seqlens=cu, return_lse=True)
    t3 = [x[0].transpose(1, 0, 2).copy() for x in (q, k, v)]  # [total, H, D]
    out, lse = ctx.attention(*t3, causal=True, cu_seqlens=cu, return_lse=True, layout="bthd")
    assert out.shape == (59, 4, 32) and lse.shape == (4, 59)
    close(out, want[0].transpose(1, 0, 2), 2e-5)
    close(lse, want_lse[0], 2e-5)
    # [H, total, D] without the layout; device tensors too
    out = ctx.attention(ctx.tensor(q[0]), ctx.tensor(k[0]), v[0], causal=True, cu_seqlens=cu)
    assert out.shape == (4, 59, 32)
    close(out, want[0], 2e-5)
    ro = vkattn.reference.attention(*t3, causal=True, cu_seqlens=cu, layout="bthd")
    close(ro, want[0].transpose(1, 0, 2), 2e-4)


def test_f16_and_head_mask_per_sequence(ctx, rng):
    cu = offsets(LENGTHS)
    q, k, v = packed_qkv(rng, LENGTHS)
    out = ctx.attention(q, k, v, causal=True, dtype="f16", cu_seqlens=cu)
    assert out.dtype == np.float16
    hm = rng.random((4, 4)).astype(np.float32)
    hm[2, 1] = 0.0
    gated = ctx.attention(q, k, v, causal=True, cu_seqlens=cu, head_mask=hm)
    for i, sq, sk in each_sequence(cu, cu):
        want = np_attention(q[:, :, sq], k[:, :, sk], v[:, :, sk], causal=True)
        close(out[:, :, sq], want, 1.5e-2)
        close(gated[:, :, sq], want * hm[i][None, :, None, None], 2e-4)
    assert np.all(gated[:, 1, cu[2]:cu[3]] == 0)


def test_offset_types(ctx, rng):
    """Lists, any integer dtype, non-contiguous arrays (torch tensors: below)."""
    cu = offsets(LENGTHS)
    q, k, v = packed_qkv(rng, LENGTHS)
    want = ctx.attention(q, k, v, causal=True, cu_seqlens=cu)
    wide = np.zeros(2 * len(cu), dtype=np.int64)
    wide[::2] = cu
    for given in (list(map(int, cu)), cu.astype(np.uint64), wide[::2]):
        assert np.array_equal(ctx.attention(q, k, v, causal=True, cu_seqlens=given), want)


def test_refusals(ctx, rng):
    cu = offsets(LENGTHS)
    q, k, v = packed_qkv(rng, LENGTHS)
    call = ctx.attention
    for given, words in ((cu.astype(np.float32), ["cu_seqlens [ 0.  9.  9. 42. 59.]", "float32"]),
                         (cu.reshape(1, -1), ["cu_seqlens", "rank 2"]),
                         ([0], ["cu_seqlens [0]", "1 offsets"]),
                         ([0, 9, 2 ** 31], ["cu_seqlens[2] = 2147483648", "int32"])):
        with pytest.raises(vkattn.InvalidInput) as e:
            call(q, k, v, cu_seqlens=given)
        assert all(w in str(e.value) for w in words), str(e.value)
    # the library's own checks name its fields
    for given, words in ((cu[:-1], "args->q_offsets[3] (the end of the last sequence) is 42"),
                         ([0, 9, 8, 42, 59], "args->q_offsets[2] is 8, less than")):
        with pytest.raises(vkattn.InvalidInput) as e:
            call(q, k, v, cu_seqlens=given)
        assert e.value.code == -1 and words in str(e.value), str(e.value)
    with pytest.raises(vkattn.InvalidInput, match="sequence 1 has 4 queries but no keys"):
        call(q[:, :, :13], k[:, :, :13], v[:, :, :13], cu_seqlens=[0, 9, 13],
             cu_seqlens_k=[0, 13, 13])
    with pytest.raises(ValueError, match="cu_seqlens_k has 4 offsets and cu_seqlens 5"):
        call(q, k, v, cu_seqlens=cu, cu_seqlens_k=cu[:-1])
    with pytest.raises(ValueError, match="cu_seqlens_k is given without cu_seqlens"):
        call(q, k, v, cu_seqlens_k=cu)
    for kw in (dict(mask=np.zeros((59, 59), np.float32)), dict(need_weights=True),
               dict(key_padding_mask=np.zeros((1, 59), bool))):
        with pytest.raises(ValueError, match="%s is given with cu_seqlens" % next(iter(kw))):
            call(q, k, v, cu_seqlens=cu, **kw)
    with pytest.raises(ValueError, match="cu_seqlens"):
        vkattn.reference.attention(q, k, v, cu_seqlens=cu.astype(np.float64))


def test_torch_sdpa_per_sequence(ctx, rng):
    """torch tensors for operands and offsets; SDPA on each sequence alone."""
    torch = pytest.importorskip("torch")
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    if sdpa is None:
        pytest.skip("torch without scaled_dot_product_attention")
    cu = offsets(LENGTHS)
    q, k, v = packed_qkv(rng, LENGTHS, Hkv=4)
    out = ctx.attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v),
                        causal=True, cu_seqlens=torch.from_numpy(cu))
    for _, sq, sk in each_sequence(cu, cu):
        want = sdpa(*(torch.from_numpy(np.ascontiguousarray(x[:, :, s]))
                      for x, s in ((q, sq), (k, sk), (v, sk))), is_causal=True)
        close(out[:, :, sq], want.numpy(), 2e-4)


def layer_state(rng, Dm, Hq, Hkv, Dh):
    names = {"wq": ("q_proj.weight", (Hq * Dh, Dm)), "wk": ("k_proj.weight", (Hkv * Dh, Dm)),
             "wv": ("v_proj.weight", (Hkv * Dh, Dm)), "wo": ("o_proj.weight", (Dm, Hq * Dh)),
             "bq": ("q_proj.bias", (Hq * Dh,)), "bk": ("k_proj.bias", (Hkv * Dh,)),
             "bv": ("v_proj.bias", (Hkv * Dh,)), "bo": ("o_proj.bias", (Dm,))}
    return {name: randn(rng, *shape) * 0.2 for name, shape in names.values()}


@pytest.mark.parametrize("rope", [False, True])
def test_layer_packed_equals_each_sequence(ctx, rng, rope):
    """The layer on packed x [1, sum T, Dm]: each sequence's rows equal the
    layer run on that sequence alone (RoPE positions restart), and the
    reference's packed call."""
    Dm, Hq, Hkv, Dh = 32, 4, 2, 8
    layer = vkattn.MultiheadAttention(ctx, Dm, Hq, num_kv_heads=Hkv, head_dim=Dh,
                                      rope_theta=10000.0 if rope else 0.0)
    layer.load_state_dict(layer_state(rng, Dm, Hq, Hkv, Dh))
    cu = offsets(LENGTHS)
    x = randn(rng, 1, int(cu[-1]), Dm)
    y = layer(x, causal=True, cu_seqlens=cu)
    assert y.shape == x.shape
    close(layer.reference(x, causal=True, cu_seqlens=cu), y, 2e-4)
    for _, s, _ in each_sequence(cu, cu):
        close(y[:, s], layer(x[:, s], causal=True), 2e-4)


def test_layer_packed_cross_attention_and_refusals(ctx, rng):
    Dm, H, Dh = 32, 2, 16
    layer = vkattn.MultiheadAttention(ctx, Dm, H, head_dim=Dh)
    layer.load_state_dict(layer_state(rng, Dm, H, H, Dh))
    cu_q, cu_k = offsets([5, 9, 2]), offsets([12, 3, 20])
    x, c = randn(rng, 1, int(cu_q[-1]), Dm), randn(rng, 1, int(cu_k[-1]), Dm)
    y = layer(x, kv=c, cu_seqlens=cu_q, cu_seqlens_k=cu_k)
    for _, sq, sk in each_sequence(cu_q, cu_k):
        close(y[:, sq], layer(x[:, sq], kv=c[:, sk]), 2e-4)
    with pytest.raises(vkattn.InvalidInput, match="need_weights is given with cu_seqlens"):
        layer(x, kv=c, cu_seqlens=cu_q, cu_seqlens_k=cu_k, need_weights=True)
    with pytest.raises(vkattn.InvalidInput, match="args->q_offsets"):
        layer(x, kv=c, cu_seqlens=offsets([5, 9, 1]), cu_seqlens_k=cu_k)
