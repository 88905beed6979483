"""torch's add_bias_kv and add_zero_attn (issue 30): the layer and the
reference against torch's own outputs and attention weights, saved by
tools/gen_torch_fixtures.py in tests/fixtures (torch 1.13, float32)."""
import os

import numpy as np
import pytest

import vkattn
from conftest import close, randn

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures")
CASES = ["mha_bias_kv_causal", "mha_zero_attn_cross_padding",
         "mha_bias_kv_zero_attn_kdim_vdim"]


def load(name):
    folder = os.path.join(FIXTURES, name)
    meta = {}
    with open(os.path.join(folder, "case.txt")) as f:
        for line in f:
            key, val = line.split()
            meta[key] = val
    arrays = {n[:-4]: np.load(os.path.join(folder, n)) for n in os.listdir(folder)
              if n.endswith(".npy")}
    return meta, arrays


def torch_state(a):
    """The fixture's weights under nn.MultiheadAttention's names."""
    sd = {"q_proj_weight": a["wq"], "k_proj_weight": a["wk"], "v_proj_weight": a["wv"],
          "out_proj.weight": a["wo"]}
    if "bq" in a:
        sd["in_proj_bias"] = np.concatenate([a["bq"], a["bk"], a["bv"]])
        sd["out_proj.bias"] = a["bo"]
    for n in ("bias_k", "bias_v"):
        if n in a:
            sd[n] = a[n]
    return sd


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("dtype,tol", [("f32", 2e-4), ("f16", 1.5e-2)])
def test_matches_torch(ctx, name, dtype, tol):
    meta, a = load(name)
    per_head = meta.get("per_head") == "1"
    Dm, H = a["x"].shape[2], int(meta["heads"])
    opts = dict(kdim=a["wk"].shape[1], vdim=a["wv"].shape[1], bias="bq" in a,
                add_bias_kv="bias_k" in a, add_zero_attn=meta.get("add_zero_attn") == "1")
    layer = vkattn.MultiheadAttention(ctx, Dm, H, dtype=dtype, **opts)
    layer.load_state_dict(torch_state(a))
    kv = a.get("kv")
    value = a.get("value")
    pad = a.get("key_padding")
    kpm = None if pad is None else pad == 0
    causal = meta.get("causal") == "1"
    y, w = layer(a["x"], kv, value, causal=causal, key_padding_mask=kpm, need_weights=True)
    close(y, a["y"], tol)
    if not per_head:  # the layer's weights are the head average, as torch's default
        close(w, a["weights"], tol)
    ry, rw = layer.reference(a["x"], kv, value, causal=causal, key_padding_mask=kpm,
                             need_weights=True)
    close(ry, a["y"], 2e-5)
    close(rw, a["weights"].mean(axis=1) if per_head else a["weights"], 2e-5)
    close(vkattn.reference.mha(a["x"], torch_state(a), embed_dim=Dm, num_heads=H, kv=kv,
                               value=value, causal=causal, key_padding_mask=kpm, **opts),
          a["y"], 2e-5)


def test_state_dict_rules(ctx, rng):
    Dm, H = 16, 2
    layer = vkattn.MultiheadAttention(ctx, Dm, H, add_bias_kv=True)
    sd = {"in_proj_weight": randn(rng, 3 * Dm, Dm), "in_proj_bias": randn(rng, 3 * Dm),
          "out_proj.weight": randn(rng, Dm, Dm), "out_proj.bias": randn(rng, Dm)}
    with pytest.raises(vkattn.Error, match="no bias_k \\(the layer has add_bias_kv\\)"):
        layer.load_state_dict(sd)
    sd.update(bias_k=randn(rng, 1, 1, Dm), bias_v=randn(rng, 1, 1, 8))
    with pytest.raises(vkattn.Error, match="bias_v has shape \\(8,\\); the layer needs \\(16,\\)"):
        layer.load_state_dict(sd)
    sd["bias_v"] = randn(rng, 1, 1, Dm)
    layer.load_state_dict(sd)
    assert layer.state_dict()["bias_k"].shape == (Dm,)
    plain = vkattn.MultiheadAttention(ctx, Dm, H)
    with pytest.raises(vkattn.Error, match="bias_k, but the layer was made without add_bias_kv"):
        plain.load_state_dict(sd)
    with pytest.raises(vkattn.Error, match="cannot be combined with desc->sinks"):
        vkattn.MultiheadAttention(ctx, Dm, H, add_zero_attn=True, sinks=True)
