#!/usr/bin/python3
"""Writes the PyTorch parity fixtures in tests/fixtures/ (committed; the tests
read them and never need torch). Needs Debian's python3-torch:
    apt-get install python3-torch && /usr/bin/python3 tools/gen_torch_fixtures.py

Each case is a folder of float32/uint8 .npy files plus `case.txt` (key value
lines) describing how to run it:
  mha cases       nn.MultiheadAttention(batch_first=True) in eval mode, run in
                  float64 (its float32 parameters converted; torch's float32
                  run must agree within 1e-4), stored as float32: x, kv
                  (cross only: the key, and the value unless value is there:
                  a value of its own, vdim), wq wk wv wo, bq bk bv bo (bias only),
                  key_padding (vkattn's convention: 1 = token, 0 = padding;
                  torch's is the opposite), mask (additive float, or bool
                  [B*H, Tq, Tk] with mask_true_blocks 1: torch's convention),
                  y and weights (torch's outputs).
  attention cases torch's scaled dot-product attention with K/V repeated to
                  the query heads (torch 1.13 has no GQA): q k v [B,H,T,D], mask
                  (additive float or bool, True = attend; any broadcast shape),
                  out. With score modifiers (written out in float64, checked
                  against SDPA with an explicit additive mask where it can
                  express them): extra keys causal, causal_align
                  (bottom_right|top_left), window, softcap, alibi_max_bias;
                  extra files sinks [Hq], alibi_slopes [Hq], lse [B,Hq,Tq]
                  (-inf for a row with nothing visible).
  decoder cases   kind mha too: modern decoder self-attention layers written
                  with Hugging Face transformers' formulas spelled out in torch
                  (no transformers package): GQA by repeat_kv, QK-norm
                  (Qwen3RMSNorm per head), RoPE (rotate_half or GPT-J's
                  rotate_every_two, partial rotary dims, llama3/linear
                  frequency scaling as _compute_llama3_parameters and
                  _compute_linear_scaling_rope_parameters), a custom scale
                  (Gemma's query_pre_attn_scalar^-0.5) and position_ids.
                  HF computes in float32; here every step is float64, so y is
                  exact up to its float32 storage. Extra keys in case.txt:
                  head_dim, scale (0: 1/sqrt(head_dim)), rope_theta,
                  rope_dims, rope_style (neox|gptj), rope_scaling
                  (none|linear|llama3), rope_factor, rope_low_freq_factor,
                  rope_high_freq_factor, rope_original_max_positions, qk_norm,
                  norm_eps; extra files q_norm/k_norm [Dh] and positions
                  [B, T] (int32). Fully masked rows (left padding) give zeros,
                  vkattn's convention (HF leaves padded rows undefined).
Seeded: running it again rewrites the same files."""
import copy
import math
import os
import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures")


def save(folder, name, array):
    np.save(os.path.join(folder, name + ".npy"), np.ascontiguousarray(array))


def write_case(name, meta, arrays):
    folder = os.path.join(ROOT, name)
    os.makedirs(folder, exist_ok=True)
    for k, v in arrays.items():
        save(folder, k, v)
    with open(os.path.join(folder, "case.txt"), "w") as f:
        for k, v in meta.items():
            f.write(f"{k} {int(v) if isinstance(v, bool) else v}\n")


def causal_mask(tq, tk):
    """vkattn's bottom-right causal rule as an additive mask."""
    i = np.arange(tq)[:, None]
    j = np.arange(tk)[None, :]
    return np.where(j <= i + (tk - tq), 0.0, -np.inf).astype(np.float32)


def mha_float64(m, query, key, value, attn_mask=None, **kw):
    """The module's outputs computed in float64 (its float32 parameters and
    inputs converted exactly), rounded to float32 for storage; torch's own
    float32 run must agree."""
    y32 = m(query, key, value, attn_mask=attn_mask, **kw)[0]
    m64 = copy.deepcopy(m).double()
    if attn_mask is not None and attn_mask.is_floating_point():
        attn_mask = attn_mask.double()
    y, w = m64(query.double(), key.double(), value.double(), attn_mask=attn_mask, **kw)
    assert torch.allclose(y32.double(), y, atol=1e-4)
    return y.detach().float(), None if w is None else w.detach().float()


def mha_case(name, seed, B, Tq, Dm, H, bias=True, Tk=None, kdim=None, causal=False,
             padding=None, per_head=False, bool_mask_3d=False, vdim=None, add_bias_kv=False,
             add_zero_attn=False):
    torch.manual_seed(seed)
    cross = Tk is not None
    Tk = Tk if cross else Tq
    m = torch.nn.MultiheadAttention(Dm, H, bias=bias, batch_first=True,
                                    kdim=kdim, vdim=vdim or kdim, add_bias_kv=add_bias_kv,
                                    add_zero_attn=add_zero_attn).eval()
    with torch.no_grad():  # make biases non-zero so they are really checked
        for p in m.parameters():
            p.add_(0.05 * torch.randn_like(p))
    x = torch.randn(B, Tq, Dm)
    c = torch.randn(B, Tk, kdim or Dm) if cross else x
    value = torch.randn(B, Tk, vdim) if vdim else c  # torch's value apart from its key
    mask = torch.from_numpy(causal_mask(Tq, Tk)) if causal else None
    if bool_mask_3d:  # torch's [B*H, Tq, Tk] boolean attn_mask: True = blocked
        blocked = torch.rand(B * H, Tq, Tk) < 0.35
        blocked[:, :, 0] = False  # every row keeps a key (torch gives NaN otherwise)
        mask = blocked
    kpm = None
    pad = None
    if padding is not None:  # number of padded keys at the end, per sequence
        pad = np.ones((B, Tk), np.uint8)
        for b, n in enumerate(padding):
            if n:
                pad[b, Tk - n:] = 0
        kpm = torch.from_numpy(pad == 0)  # torch: True = ignore
    # with gradients on, torch takes its reference (non-fused) path: its fused
    # inference path fails on bias=False in 1.13
    y, w = mha_float64(m, x, c, value, key_padding_mask=kpm, attn_mask=mask,
                       need_weights=True, average_attn_weights=not per_head)
    assert torch.isfinite(y).all() and torch.isfinite(w).all(), name
    if m._qkv_same_embed_dim:
        wq, wk, wv = m.in_proj_weight.detach().chunk(3)
    else:
        wq, wk, wv = m.q_proj_weight.detach(), m.k_proj_weight.detach(), m.v_proj_weight.detach()
    arrays = {"x": x.numpy(), "wq": wq.numpy(), "wk": wk.numpy(), "wv": wv.numpy(),
              "wo": m.out_proj.weight.detach().numpy(), "y": y.numpy(), "weights": w.numpy()}
    if add_bias_kv:  # torch's [1, 1, E]
        arrays.update(bias_k=m.bias_k.detach().numpy(), bias_v=m.bias_v.detach().numpy())
    if bias:
        bq, bk, bv = m.in_proj_bias.detach().chunk(3)
        arrays.update(bq=bq.numpy(), bk=bk.numpy(), bv=bv.numpy(), bo=m.out_proj.bias.detach().numpy())
    if cross:
        arrays["kv"] = c.numpy()
    if vdim:
        arrays["value"] = value.numpy()
    if pad is not None:
        arrays["key_padding"] = pad
    if bool_mask_3d:
        arrays["mask"] = mask.numpy()
    meta = dict(kind="mha", heads=H, kv_heads=H, bias=bias, causal=causal, cross=cross,
                per_head=per_head)
    if bool_mask_3d:  # bool mask [B*H, Tq, Tk], True = blocked
        meta["mask_true_blocks"] = True
    if add_zero_attn:
        meta["add_zero_attn"] = True
    write_case(name, meta, arrays)


def attention_case(name, seed, B, Hq, Hkv, Tq, Tk, D, causal=False, scale=None, with_mask=False):
    torch.manual_seed(seed)
    q = torch.randn(B, Hq, Tq, D)
    k = torch.randn(B, Hkv, Tk, D)
    v = torch.randn(B, Hkv, Tk, D)
    add = torch.zeros(Tq, Tk)
    if with_mask:
        add = 0.5 * torch.randn(Tq, Tk)
    if causal:
        add = add + torch.from_numpy(causal_mask(Tq, Tk))
    kr = k.repeat_interleave(Hq // Hkv, 1)
    vr = v.repeat_interleave(Hq // Hkv, 1)
    s = scale if scale is not None else 1.0 / D ** 0.5
    # explicit formula in float64 by torch (the reference of the reference)
    scores = (q.double() @ kr.double().transpose(-1, -2)) * s + add.double()
    out = torch.softmax(scores, -1) @ vr.double()
    # and torch's own kernel in float32, which must agree
    f = getattr(F, "_scaled_dot_product_attention")
    q32 = q * (s * D ** 0.5)  # torch 1.13's kernel always scales by 1/sqrt(D)
    out32 = f(q32, kr, vr, add, 0.0, False, False)[0]
    assert torch.allclose(out32.double(), out, atol=1e-4), name
    arrays = {"q": q.numpy(), "k": k.numpy(), "v": v.numpy(), "out": out.float().numpy()}
    if with_mask or causal:
        arrays["mask"] = add.numpy().astype(np.float32)
    meta = dict(kind="attention", scale=scale if scale is not None else 0)
    write_case(name, meta, arrays)


def mask_form_case(name, seed, B, Hq, Hkv, Tq, Tk, D, mask):
    """SDPA with a mask in a broadcast shape, as PyTorch users pass it: bool
    (True = attend) or additive float, expanded here only for the formula."""
    torch.manual_seed(seed)
    q = torch.randn(B, Hq, Tq, D)
    k = torch.randn(B, Hkv, Tk, D)
    v = torch.randn(B, Hkv, Tk, D)
    m = torch.from_numpy(mask)
    add = torch.where(m, 0.0, -math.inf) if m.dtype == torch.bool else m
    add = add.double().expand(B, Hq, Tq, Tk)
    kr = k.repeat_interleave(Hq // Hkv, 1)
    vr = v.repeat_interleave(Hq // Hkv, 1)
    scores = (q.double() @ kr.double().transpose(-1, -2)) / D ** 0.5 + add
    out = torch.softmax(scores, -1) @ vr.double()
    f = getattr(F, "_scaled_dot_product_attention")
    out32 = f(q, kr, vr, add.float(), 0.0, False, False)[0]
    assert torch.allclose(out32.double(), out, atol=1e-4), name
    arrays = {"q": q.numpy(), "k": k.numpy(), "v": v.numpy(), "out": out.float().numpy(),
              "mask": mask}
    write_case(name, dict(kind="attention", scale=0), arrays)


def mask_form_cases():
    rng = np.random.default_rng(31)
    # SDPA's key padding form [B, 1, 1, Tk] (True = attend), GQA
    pad = rng.random((2, 1, 1, 11)) < 0.7
    pad[:, :, :, 0] = True
    mask_form_case("attn_sdpa_bool_b11k", 20, B=2, Hq=4, Hkv=2, Tq=7, Tk=11, D=16, mask=pad)
    # a per-head additive bias [1, Hq, 1, Tk]
    bias = rng.standard_normal((1, 4, 1, 9)).astype(np.float32)
    mask_form_case("attn_sdpa_float_1h1k", 21, B=2, Hq=4, Hkv=4, Tq=5, Tk=9, D=8, mask=bias)


def bloom_alibi_slopes(n_heads, max_bias):
    """BLOOM's build_alibi_tensor slopes (closest power of two, then the
    interleaved extra ones), generalised from max_bias 8 as ggml and
    FlashAttention do: base 2^(-max_bias/n), extra base 2^(-max_bias/2n)."""
    closest = 2 ** math.floor(math.log2(n_heads))
    base = 2.0 ** (-max_bias / closest)
    slopes = [base ** p for p in range(1, closest + 1)]
    if closest != n_heads:
        extra_base = 2.0 ** (-max_bias / (2 * closest))
        n_extra = min(closest, n_heads - closest)
        slopes += [extra_base ** p for p in range(1, 1 + 2 * n_extra, 2)]
    return torch.tensor(slopes, dtype=torch.float64)


def visible_keys(tq, tk, causal, window, top_left=False):
    """(positions i' [tq, 1], keys j [1, tk], visible [tq, tk]): i' = i
    (top-left) or i + tk - tq (bottom-right); causal j <= i'; window
    i' - j < W (and j - i' < W without causal)."""
    pos = torch.arange(tq)[:, None] + (0 if top_left else tk - tq)
    j = torch.arange(tk)[None, :]
    visible = torch.ones(tq, tk, dtype=torch.bool)
    if causal:
        visible &= j <= pos
    if window:
        visible &= (pos - j) < window
        if not causal:
            visible &= (j - pos) < window
    return pos, j, visible


def mods_attention_case(name, seed, B, Hq, Hkv, Tq, Tk, D, causal=False, top_left=False,
                        window=0, softcap=0.0, sinks=False, alibi_max_bias=0.0,
                        alibi_slopes=None, scale=None, with_mask=False, amp=1.0):
    """Attention with score modifiers, written out in float64: positions
    i' = i (top-left) or i + Tk - Tq (bottom-right); causal j <= i'; window
    i' - j < W (and j - i' < W without causal); softcap C tanh(s / C) on the
    scaled score, then the additive mask and ALiBi -slope |i' - j|; sinks as
    gpt-oss writes them (a logit column joined to the softmax, then dropped);
    lse = logsumexp over that row. Rows with nothing visible: zeros and -inf.
    Without softcap, torch's own SDPA kernel (float64, the rules as one
    additive mask, a sink as an extra zero key/value masked to its logit)
    must agree; top-left causal alone is also checked against is_causal."""
    torch.manual_seed(seed)
    q = (amp * torch.randn(B, Hq, Tq, D)).float()
    k = (amp * torch.randn(B, Hkv, Tk, D)).float()
    v = torch.randn(B, Hkv, Tk, D)
    add = 0.5 * torch.randn(Tq, Tk) if with_mask else torch.zeros(Tq, Tk)
    sink = torch.randn(Hq).float() if sinks else None
    s = f32(scale) if scale is not None else 1.0 / D ** 0.5
    pos, j, visible = visible_keys(Tq, Tk, causal, window, top_left)
    bias = torch.zeros(Hq, Tq, Tk, dtype=torch.float64)
    slopes = None
    if alibi_slopes is not None:
        slopes = torch.tensor(alibi_slopes, dtype=torch.float32).double()
    elif alibi_max_bias:
        slopes = bloom_alibi_slopes(Hq, alibi_max_bias)
    if slopes is not None:
        bias = -slopes[:, None, None] * (pos - j).abs().double()[None]
    kr = k.double().repeat_interleave(Hq // Hkv, 1)
    vr = v.double().repeat_interleave(Hq // Hkv, 1)
    scores = (q.double() @ kr.transpose(-1, -2)) * s
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)
    scores = scores + add.double() + bias
    scores = scores.masked_fill(~visible, -math.inf)
    hidden = ~visible.any(-1)  # [Tq]
    if sinks:  # gpt-oss: cat the sink logit, softmax, drop its column
        col = sink.double()[None, :, None, None].expand(B, Hq, Tq, 1)
        combined = torch.cat([scores, col], -1)
    else:
        combined = scores
    safe = combined.masked_fill(hidden[None, None, :, None], 0.0)  # no NaN rows
    probs = torch.softmax(safe, -1)[..., :Tk]
    lse = torch.logsumexp(safe, -1)
    probs = probs.masked_fill(hidden[None, None, :, None], 0.0)
    lse = lse.masked_fill(hidden[None, None, :], -math.inf)
    out = probs @ vr
    f = getattr(F, "_scaled_dot_product_attention")
    if not softcap:  # torch's kernel with the rules as an additive mask
        full = (add.double() + bias).masked_fill(~visible, -math.inf).expand(B, Hq, Tq, Tk)
        qs, ks, vs = q.double() * (s * D ** 0.5), kr, vr
        if sinks:  # an extra key of zeros (score 0) masked to the sink's logit
            ks = torch.cat([ks, torch.zeros(B, Hq, 1, D, dtype=torch.float64)], 2)
            vs = torch.cat([vs, torch.zeros(B, Hq, 1, D, dtype=torch.float64)], 2)
            full = torch.cat([full, sink.double()[None, :, None, None].expand(B, Hq, Tq, 1)], -1)
        keep = ~hidden
        o = f(qs, ks, vs, full, 0.0, False, False)[0]
        assert torch.allclose(o[:, :, keep], out[:, :, keep], atol=1e-12), name
    if causal and top_left and not (window or softcap or sinks or slopes is not None or with_mask):
        o = f(q.double() * (s * D ** 0.5), kr, vr, None, 0.0, False, True)[0]
        assert torch.allclose(o, out, atol=1e-12), name + ": is_causal is top-left"
    arrays = {"q": q.numpy(), "k": k.numpy(), "v": v.float().numpy(),
              "out": out.float().numpy(), "lse": lse.float().numpy()}
    if with_mask:
        arrays["mask"] = add.float().numpy()
    if sinks:
        arrays["sinks"] = sink.numpy()
    if alibi_slopes is not None:
        arrays["alibi_slopes"] = np.asarray(alibi_slopes, np.float32)
    meta = dict(kind="attention", scale=repr(s) if scale is not None else 0, causal=causal,
                causal_align="top_left" if top_left else "bottom_right", window=window,
                softcap=repr(f32(softcap)) if softcap else 0,
                alibi_max_bias=repr(f32(alibi_max_bias)) if alibi_max_bias else 0)
    write_case(name, meta, arrays)


def mods_attention_cases():
    # Mistral 7B: GQA 32/8 scaled down, causal sliding window smaller than T.
    mods_attention_case("attn_mistral_window", 14, B=1, Hq=8, Hkv=2, Tq=24, Tk=24, D=16,
                        causal=True, window=7)
    # Gemma 2: logit softcap 50 (scores pushed to about +-60 first) on a local
    # (windowed) layer, query_pre_attn_scalar-style scale.
    mods_attention_case("attn_gemma2_softcap_window", 15, B=2, Hq=4, Hkv=2, Tq=16, Tk=16, D=32,
                        causal=True, window=6, softcap=50.0, scale=0.125, amp=6.0)
    # gpt-oss: a learned sink logit per head, causal GQA.
    mods_attention_case("attn_gptoss_sinks", 16, B=1, Hq=8, Hkv=2, Tq=12, Tk=12, D=16,
                        causal=True, sinks=True)
    # BLOOM: ALiBi from max_bias 8 with 12 heads (non-power-of-two slopes).
    mods_attention_case("attn_bloom_alibi", 17, B=2, Hq=12, Hkv=12, Tq=10, Tk=10, D=16,
                        causal=True, alibi_max_bias=8.0)
    # PyTorch SDPA's is_causal (top-left) with fewer queries than keys.
    mods_attention_case("attn_sdpa_top_left", 18, B=1, Hq=4, Hkv=4, Tq=5, Tk=9, D=8,
                        causal=True, top_left=True)
    # Everything at once: non-causal top-left window with more queries than
    # keys (the last row sees nothing), explicit slopes, sinks, a float mask.
    mods_attention_case("attn_mods_combined", 19, B=2, Hq=4, Hkv=1, Tq=9, Tk=6, D=8,
                        top_left=True, window=3, sinks=True, alibi_slopes=[0.5, 0.2, 0.05, 1.0],
                        with_mask=True, softcap=2.0)


def f32(v):
    """A float as float32 stores it: case.txt values are read into float32
    desc fields, so the fixture computes with exactly those."""
    return float(np.float32(v))


def rope_inv_freq(rope, R):
    """HF _compute_default_rope_parameters (float64 here), then the scaling of
    _compute_linear_scaling_rope_parameters / _compute_llama3_parameters."""
    inv_freq = 1.0 / (rope["theta"] ** (torch.arange(0, R, 2, dtype=torch.int64).double() / R))
    scaling = rope.get("scaling", "none")
    if scaling == "linear":
        return inv_freq / rope["factor"]
    if scaling != "llama3":
        return inv_freq
    factor, low_freq_factor = rope["factor"], rope["low_freq_factor"]
    high_freq_factor, old_context_len = rope["high_freq_factor"], rope["original_max_positions"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


def rotate_half(x):  # HF Llama / Qwen / Gemma / GPT-NeoX
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotate_every_two(x):  # HF GPT-J
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)


def apply_rope(x, position_ids, rope):
    """x [B, H, T, Dh]; the first R dims rotated, the rest passed through
    (HF's partial_rotary_factor / GPT-J's rotary_dim)."""
    R = rope.get("dims") or x.shape[-1]
    inv_freq = rope_inv_freq(rope, R)
    freqs = position_ids.double()[:, :, None] * inv_freq[None, None, :]  # [B, T, R/2]
    x_rot, x_pass = x[..., :R], x[..., R:]
    if rope.get("style", "neox") == "neox":
        emb = torch.cat((freqs, freqs), dim=-1)  # LlamaRotaryEmbedding.forward
        cos, sin = emb.cos()[:, None], emb.sin()[:, None]  # unsqueeze_dim=1
        x_rot = x_rot * cos + rotate_half(x_rot) * sin
    else:
        sin = torch.repeat_interleave(freqs.sin()[:, None], 2, dim=-1)
        cos = torch.repeat_interleave(freqs.cos()[:, None], 2, dim=-1)
        x_rot = x_rot * cos + rotate_every_two(x_rot) * sin
    return torch.cat((x_rot, x_pass), dim=-1)


def rms_norm(x, weight, eps):  # Qwen3RMSNorm
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def repeat_kv(x, n_rep):  # HF: [B, Hkv, T, D] -> [B, Hkv * n_rep, T, D]
    b, h, t, d = x.shape
    return x[:, :, None].expand(b, h, n_rep, t, d).reshape(b, h * n_rep, t, d)


def decoder_case(name, seed, B, T, Dm, H, Hkv, Dh, bias=False, causal=True, rope=None,
                 qk_norm=False, norm_eps=1e-6, scale=None, left_padding=None, positions=None,
                 per_head=False):
    """A decoder self-attention layer (HF LlamaAttention.forward and its
    relatives), in float64. `positions`: "hf" derives position_ids from the
    left padding as HF's generate does (cumsum of the attention mask - 1,
    padding set to 1); an array is used as given."""
    torch.manual_seed(seed)
    lin = lambda i, o: torch.nn.Linear(i, o, bias=bias).double()
    q_proj, k_proj, v_proj = lin(Dm, H * Dh), lin(Dm, Hkv * Dh), lin(Dm, Hkv * Dh)
    o_proj = lin(H * Dh, Dm)
    with torch.no_grad():
        for m in (q_proj, k_proj, v_proj, o_proj):
            for p in m.parameters():  # non-zero biases, really checked
                p.copy_((p + 0.05 * torch.randn_like(p)).float().double())
    x = torch.randn(B, T, Dm).float().double()
    q_w = (1.0 + 0.3 * torch.randn(Dh)).float().double()
    k_w = (1.0 + 0.3 * torch.randn(Dh)).float().double()
    pad = np.ones((B, T), np.uint8)
    for b, n in enumerate(left_padding or []):
        pad[b, :n] = 0
    if isinstance(positions, str):
        am = torch.from_numpy(pad.astype(np.int64))
        position_ids = am.cumsum(-1) - 1
        position_ids.masked_fill_(am == 0, 1)
    elif positions is not None:
        position_ids = torch.as_tensor(np.asarray(positions, np.int64))
    else:
        position_ids = torch.arange(T)[None].expand(B, T)
    norm_eps = f32(norm_eps)
    scale = f32(scale) if scale is not None else 1.0 / math.sqrt(Dh)
    with torch.no_grad():
        shape = lambda t, h: t.view(B, T, h, Dh)
        q, k, v = shape(q_proj(x), H), shape(k_proj(x), Hkv), shape(v_proj(x), Hkv)
        if qk_norm:  # Qwen3: norm on [B, T, H, Dh], before the transpose and RoPE
            q, k = rms_norm(q, q_w, norm_eps), rms_norm(k, k_w, norm_eps)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if rope:
            q, k = apply_rope(q, position_ids, rope), apply_rope(k, position_ids, rope)
        k, v = repeat_kv(k, H // Hkv), repeat_kv(v, H // Hkv)
        scores = q @ k.transpose(2, 3) * scale
        hidden = torch.from_numpy(pad == 0)[:, None, None, :].expand(B, 1, T, T)
        if causal:
            hidden = hidden | torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        scores = scores.masked_fill(hidden, -math.inf)
        mx = scores.amax(-1, keepdim=True).clamp_min(-1e300)  # all-hidden rows: no NaN
        e = torch.exp(scores - mx)
        s = e.sum(-1, keepdim=True)
        probs = torch.where(s > 0, e / s.clamp_min(1e-300), torch.zeros_like(e))
        o = (probs @ v).transpose(1, 2).reshape(B, T, H * Dh)
        y = o_proj(o)
    w = probs if per_head else probs.mean(1)
    assert torch.isfinite(y).all() and torch.isfinite(w).all(), name
    arrays = {"x": x.float().numpy(), "wq": q_proj.weight.detach().float().numpy(),
              "wk": k_proj.weight.detach().float().numpy(), "wv": v_proj.weight.detach().float().numpy(),
              "wo": o_proj.weight.detach().float().numpy(), "y": y.float().numpy(),
              "weights": w.float().numpy()}
    if bias:
        arrays.update(bq=q_proj.bias.detach().float().numpy(), bk=k_proj.bias.detach().float().numpy(),
                      bv=v_proj.bias.detach().float().numpy(), bo=o_proj.bias.detach().float().numpy())
    if left_padding:
        arrays["key_padding"] = pad
    if positions is not None:
        arrays["positions"] = position_ids.numpy().astype(np.int32)
    meta = dict(kind="mha", heads=H, kv_heads=Hkv, head_dim=Dh, bias=bias, causal=causal,
                cross=False, per_head=per_head, scale=repr(scale) if scale != 1.0 / math.sqrt(Dh) else 0)
    if rope:
        meta.update(rope_theta=repr(rope["theta"]), rope_dims=rope.get("dims", 0),
                    rope_style=rope.get("style", "neox"), rope_scaling=rope.get("scaling", "none"))
        for key in ("factor", "low_freq_factor", "high_freq_factor", "original_max_positions"):
            if key in rope:
                meta["rope_" + key] = repr(rope[key])
    if qk_norm:
        meta.update(qk_norm=True, norm_eps=repr(norm_eps))
        arrays.update(q_norm=q_w.float().numpy(), k_norm=k_w.float().numpy())
    write_case(name, meta, arrays)


def decoder_cases():
    # Llama 3.1: GQA, no bias, theta 500000 with llama3 scaling. Its low
    # frequencies only matter over thousands of positions, so the tokens sit
    # at sorted positions up to 30000 (a packed / sparse position_ids).
    g = np.random.default_rng(10)
    sparse = np.sort(g.choice(30000, size=(2, 7), replace=False), axis=1)
    decoder_case("dec_llama3_gqa", 10, B=2, T=7, Dm=64, H=8, Hkv=2, Dh=16,
                 rope=dict(theta=500000.0, scaling="llama3", factor=8.0, low_freq_factor=1.0,
                           high_freq_factor=4.0, original_max_positions=8192),
                 positions=sparse)
    # Qwen3: QK-norm (RMSNorm per head, eps 1e-6) then RoPE theta 1e6.
    decoder_case("dec_qwen3_qknorm", 11, B=2, T=6, Dm=64, H=4, Hkv=2, Dh=32, qk_norm=True,
                 rope=dict(theta=1000000.0), per_head=True)
    # GPT-J: interleaved RoPE on the first 8 of 16 dims (rotary_dim), with
    # the biases GPT-NeoX has.
    decoder_case("dec_gptj_partial", 12, B=1, T=9, Dm=64, H=4, Hkv=4, Dh=16, bias=True,
                 rope=dict(theta=10000.0, dims=8, style="gptj"))
    # Gemma: MQA, scale query_pre_attn_scalar^-0.5 (24, not head_dim 16), a
    # left-padded batch with HF's position_ids from the attention mask.
    decoder_case("dec_gemma_scale_positions", 13, B=3, T=6, Dm=64, H=4, Hkv=1, Dh=16,
                 rope=dict(theta=10000.0), scale=24 ** -0.5, left_padding=[0, 2, 3],
                 positions="hf")


def offsets_of(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


def varlen_attention_case(name, seed, Hq, Hkv, q_lens, k_lens, D, causal=False, window=0,
                          softcap=0.0, amp=1.0):
    """Packed ragged sequences (FlashAttention's varlen form, issue 30): Q
    [1, Hq, sum Tq, D], K/V [1, Hkv, sum Tk, D] and the int32 offsets [B + 1];
    each sequence attended alone in float64 with its own bottom-right causal
    rule and window (positions i + Tk_i - Tq_i), softcap on the scaled score;
    rows with nothing visible: zeros and lse -inf. Without softcap torch's own
    kernel (float64) must agree sequence by sequence."""
    torch.manual_seed(seed)
    qo, ko = offsets_of(q_lens), offsets_of(k_lens)
    q = (amp * torch.randn(1, Hq, int(qo[-1]), D)).float()
    k = (amp * torch.randn(1, Hkv, int(ko[-1]), D)).float()
    v = torch.randn(1, Hkv, int(ko[-1]), D)
    s = 1.0 / D ** 0.5
    out = torch.zeros(1, Hq, int(qo[-1]), D, dtype=torch.float64)
    lse = torch.full((1, Hq, int(qo[-1])), -math.inf, dtype=torch.float64)
    f = getattr(F, "_scaled_dot_product_attention")
    for i in range(len(q_lens)):
        tq, tk = q_lens[i], k_lens[i]
        if tq == 0:
            continue
        sq, sk = slice(qo[i], qo[i + 1]), slice(ko[i], ko[i + 1])
        kr = k[:, :, sk].double().repeat_interleave(Hq // Hkv, 1)
        vr = v[:, :, sk].double().repeat_interleave(Hq // Hkv, 1)
        visible = visible_keys(tq, tk, causal, window)[2]
        scores = (q[:, :, sq].double() @ kr.transpose(-1, -2)) * s
        if softcap:
            scores = softcap * torch.tanh(scores / softcap)
        scores = scores.masked_fill(~visible, -math.inf)
        hidden = ~visible.any(-1)
        safe = scores.masked_fill(hidden[None, None, :, None], 0.0)
        probs = torch.softmax(safe, -1).masked_fill(hidden[None, None, :, None], 0.0)
        o = probs @ vr
        out[:, :, sq] = o
        lse[:, :, sq] = torch.logsumexp(safe, -1).masked_fill(hidden[None, None, :], -math.inf)
        keep = ~hidden
        if not softcap and tk and keep.any():
            add = torch.zeros(tq, tk, dtype=torch.float64).masked_fill(~visible, -math.inf)
            t = f(q[:, :, sq].double(), kr, vr, add.expand(1, Hq, tq, tk), 0.0, False, False)[0]
            assert torch.allclose(t[:, :, keep], o[:, :, keep], atol=1e-12), name
    arrays = {"q": q.numpy(), "k": k.numpy(), "v": v.float().numpy(),
              "out": out.float().numpy(), "lse": lse.float().numpy(),
              "q_offsets": qo, "k_offsets": ko}
    meta = dict(kind="attention", scale=0, causal=causal, causal_align="bottom_right",
                window=window, softcap=repr(f32(softcap)) if softcap else 0)
    write_case(name, meta, arrays)


def varlen_mha_case(name, seed, Dm, H, q_lens, k_lens=None, kdim=None, vdim=None, causal=False):
    """nn.MultiheadAttention over packed ragged sequences (issue 30): X
    [1, sum T, Dm] with seq_offsets (and key/value [1, sum Tk, kdim/vdim] with
    kv_offsets for cross-attention); torch runs each sequence alone (batch 1,
    its own causal mask, in float64) and the outputs are concatenated."""
    torch.manual_seed(seed)
    cross = k_lens is not None
    k_lens = k_lens if cross else q_lens
    m = torch.nn.MultiheadAttention(Dm, H, batch_first=True, kdim=kdim, vdim=vdim or kdim).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.05 * torch.randn_like(p))
    qo, ko = offsets_of(q_lens), offsets_of(k_lens)
    x = torch.randn(1, int(qo[-1]), Dm)
    c = torch.randn(1, int(ko[-1]), kdim or Dm) if cross else x
    value = torch.randn(1, int(ko[-1]), vdim) if vdim else c
    ys = []
    for i in range(len(q_lens)):
        sq, sk = slice(qo[i], qo[i + 1]), slice(ko[i], ko[i + 1])
        mask = torch.from_numpy(causal_mask(q_lens[i], k_lens[i])) if causal else None
        ys.append(mha_float64(m, x[:, sq], c[:, sk], value[:, sk], attn_mask=mask,
                              need_weights=True)[0])
    y = torch.cat(ys, 1)
    assert torch.isfinite(y).all(), name
    if m._qkv_same_embed_dim:
        wq, wk, wv = m.in_proj_weight.detach().chunk(3)
    else:
        wq, wk, wv = m.q_proj_weight.detach(), m.k_proj_weight.detach(), m.v_proj_weight.detach()
    bq, bk, bv = m.in_proj_bias.detach().chunk(3)
    arrays = {"x": x.numpy(), "wq": wq.numpy(), "wk": wk.numpy(), "wv": wv.numpy(),
              "wo": m.out_proj.weight.detach().numpy(), "y": y.numpy(), "bq": bq.numpy(),
              "bk": bk.numpy(), "bv": bv.numpy(), "bo": m.out_proj.bias.detach().numpy(),
              "seq_offsets": qo}
    if cross:
        arrays.update(kv=c.numpy(), kv_offsets=ko)
    if vdim:
        arrays["value"] = value.numpy()
    meta = dict(kind="mha", heads=H, kv_heads=H, bias=True, causal=causal, cross=cross,
                per_head=False)
    write_case(name, meta, arrays)


def varlen_cases():
    # GQA self-attention, causal, an empty sequence and one of a single token
    varlen_attention_case("attn_varlen_gqa_causal", 28, Hq=8, Hkv=2, q_lens=[7, 0, 12, 1, 5],
                          k_lens=[7, 0, 12, 1, 5], D=32, causal=True)
    # MQA cross lengths: causal bottom-right per sequence (the third's first
    # rows see nothing), a window and Gemma 2's softcap
    varlen_attention_case("attn_varlen_cross_window_softcap", 29, Hq=4, Hkv=1, q_lens=[5, 9, 3],
                          k_lens=[8, 9, 1], D=16, causal=True, window=4, softcap=30.0, amp=4.0)
    varlen_mha_case("mha_varlen_causal", 30, Dm=32, H=4, q_lens=[6, 1, 9, 3], causal=True)
    varlen_mha_case("mha_varlen_cross_kdim_vdim", 31, Dm=32, H=2, q_lens=[2, 5, 3],
                    k_lens=[4, 1, 6], kdim=24, vdim=40)


if __name__ == "__main__":
    mha_case("mha_self_bias", 1, B=2, Tq=7, Dm=32, H=4)
    mha_case("mha_self_causal_per_head", 2, B=1, Tq=9, Dm=64, H=8, causal=True, per_head=True)
    mha_case("mha_self_padding_nobias", 3, B=2, Tq=6, Dm=32, H=2, bias=False, padding=[0, 2])
    mha_case("mha_cross", 4, B=2, Tq=5, Dm=32, H=2, Tk=8, kdim=24)
    mha_case("mha_causal_padding", 5, B=3, Tq=8, Dm=48, H=6, causal=True, padding=[1, 0, 3])
    mha_case("mha_cross_same_dim_padding", 6, B=2, Tq=4, Dm=16, H=2, Tk=11, padding=[5, 0])
    attention_case("attn_gqa_causal", 7, B=1, Hq=8, Hkv=2, Tq=6, Tk=10, D=16, causal=True)
    attention_case("attn_mqa_mask", 8, B=2, Hq=4, Hkv=1, Tq=5, Tk=5, D=32, with_mask=True)
    attention_case("attn_mha_scale", 9, B=1, Hq=3, Hkv=3, Tq=12, Tk=7, D=64, scale=0.3)
    decoder_cases()
    mods_attention_cases()
    mask_form_cases()
    mha_case("mha_bool_mask_3d", 22, B=2, Tq=6, Dm=16, H=2, bool_mask_3d=True)
    # key and value apart, with kdim and vdim of their own (issue 30)
    mha_case("mha_kdim_vdim", 23, B=2, Tq=5, Dm=32, H=4, Tk=7, kdim=24, vdim=40,
             padding=[0, 2])
    mha_case("mha_vdim_per_head_nobias", 24, B=1, Tq=6, Dm=16, H=2, Tk=9, kdim=16, vdim=24,
             bias=False, per_head=True)
    # add_bias_kv and add_zero_attn, alone and together, with masks (issue 30)
    mha_case("mha_bias_kv_causal", 25, B=2, Tq=6, Dm=32, H=4, causal=True, add_bias_kv=True)
    mha_case("mha_zero_attn_cross_padding", 26, B=2, Tq=5, Dm=32, H=2, Tk=8, kdim=24,
             padding=[0, 3], add_zero_attn=True, per_head=True)
    mha_case("mha_bias_kv_zero_attn_kdim_vdim", 27, B=2, Tq=4, Dm=32, H=4, Tk=7, kdim=24,
             vdim=40, padding=[2, 0], add_bias_kv=True, add_zero_attn=True)
    # packed ragged sequences (issue 30)
    varlen_cases()
    print("fixtures written to", os.path.normpath(ROOT))
