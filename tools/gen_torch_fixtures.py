#!/usr/bin/python3
"""Writes the PyTorch parity fixtures in tests/fixtures/ (committed; the tests
read them and never need torch). Needs Debian's python3-torch:
    apt-get install python3-torch && /usr/bin/python3 tools/gen_torch_fixtures.py

Each case is a folder of float32/uint8 .npy files plus `case.txt` (key value
lines) describing how to run it:
  mha cases       nn.MultiheadAttention(batch_first=True) in eval mode: x, kv
                  (cross only), wq wk wv wo, bq bk bv bo (bias only),
                  key_padding (vkattn's convention: 1 = token, 0 = padding;
                  torch's is the opposite), mask (additive), y and weights
                  (torch's outputs).
  attention cases torch's scaled dot-product attention with K/V repeated to
                  the query heads (torch 1.13 has no GQA): q k v [B,H,T,D], mask,
                  out.
Seeded: running it again rewrites the same files."""
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


def mha_case(name, seed, B, Tq, Dm, H, bias=True, Tk=None, kdim=None, causal=False,
             padding=None, per_head=False):
    torch.manual_seed(seed)
    cross = Tk is not None
    Tk = Tk if cross else Tq
    m = torch.nn.MultiheadAttention(Dm, H, bias=bias, batch_first=True,
                                    kdim=kdim, vdim=kdim).eval()
    with torch.no_grad():  # make biases non-zero so they are really checked
        for p in m.parameters():
            p.add_(0.05 * torch.randn_like(p))
    x = torch.randn(B, Tq, Dm)
    c = torch.randn(B, Tk, kdim or Dm) if cross else x
    mask = torch.from_numpy(causal_mask(Tq, Tk)) if causal else None
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
    y, w = m(x, c, c, key_padding_mask=kpm, attn_mask=mask, need_weights=True,
             average_attn_weights=not per_head)
    y, w = y.detach(), w.detach()
    assert torch.isfinite(y).all() and torch.isfinite(w).all(), name
    if m._qkv_same_embed_dim:
        wq, wk, wv = m.in_proj_weight.detach().chunk(3)
    else:
        wq, wk, wv = m.q_proj_weight.detach(), m.k_proj_weight.detach(), m.v_proj_weight.detach()
    arrays = {"x": x.numpy(), "wq": wq.numpy(), "wk": wk.numpy(), "wv": wv.numpy(),
              "wo": m.out_proj.weight.detach().numpy(), "y": y.numpy(), "weights": w.numpy()}
    if bias:
        bq, bk, bv = m.in_proj_bias.detach().chunk(3)
        arrays.update(bq=bq.numpy(), bk=bk.numpy(), bv=bv.numpy(), bo=m.out_proj.bias.detach().numpy())
    if cross:
        arrays["kv"] = c.numpy()
    if pad is not None:
        arrays["key_padding"] = pad
    meta = dict(kind="mha", heads=H, kv_heads=H, bias=bias, causal=causal, cross=cross,
                per_head=per_head)
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
    print("fixtures written to", os.path.normpath(ROOT))
