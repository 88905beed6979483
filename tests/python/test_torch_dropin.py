"""vkattn.MultiheadAttention in torch.nn.MultiheadAttention's signature
(issue 30 part 4): against torch's saved outputs (tests/fixtures), and
against torch itself where it is installed."""
import numpy as np
import pytest

import vkattn
from conftest import close, randn
from test_mha_appended import CASES, load, torch_state


@pytest.fixture
def dropin_ctx(ctx):
    return ctx


@pytest.mark.parametrize("name", CASES + ["mha_kdim_vdim", "mha_self_bias",
                                          "mha_bool_mask_3d"])
def test_fixtures_seq_first(dropin_ctx, name):
    meta, a = load(name)
    H, Dm = int(meta["heads"]), a["x"].shape[2]
    kdim, vdim = a["wk"].shape[1], a["wv"].shape[1]
    m = vkattn.MultiheadAttention(Dm, H, bias="bq" in a, add_bias_kv="bias_k" in a,
                                  add_zero_attn=meta.get("add_zero_attn") == "1",
                                  kdim=kdim, vdim=vdim, device=dropin_ctx)
    assert isinstance(m, vkattn.MultiheadAttention)
    m.load_state_dict(torch_state(a))
    m.eval()
    x = np.swapaxes(a["x"], 0, 1)  # torch's default [L, B, E]
    kv = np.swapaxes(a["kv"], 0, 1) if "kv" in a else x
    value = np.swapaxes(a["value"], 0, 1) if "value" in a else kv
    kpm = a["key_padding"] == 0 if "key_padding" in a else None
    mask = a.get("mask")
    if meta.get("causal") == "1":
        tq, tk = a["x"].shape[1], (a["kv"] if "kv" in a else a["x"]).shape[1]
        mask = np.triu(np.ones((tq, tk), bool), 1 + tk - tq)  # True = hidden
    per_head = meta.get("per_head") == "1"
    y, w = m(x, kv, value, key_padding_mask=kpm, attn_mask=mask,
             average_attn_weights=not per_head)
    close(np.swapaxes(y, 0, 1), a["y"], 2e-4)
    close(w, a["weights"], 2e-4)
    y2, w2 = m(x, kv, value, key_padding_mask=kpm, attn_mask=mask, need_weights=False)
    assert w2 is None
    close(y2, y, 1e-6)


def test_unbatched_causal_and_dropout(dropin_ctx, rng):
    Dm, H = 16, 2
    m = vkattn.MultiheadAttention(Dm, H, dropout=0.1, batch_first=True, device=dropin_ctx)
    sd = {"in_proj_weight": randn(rng, 3 * Dm, Dm), "in_proj_bias": randn(rng, 3 * Dm),
          "out_proj.weight": randn(rng, Dm, Dm), "out_proj.bias": randn(rng, Dm)}
    m.load_state_dict(sd)
    x = randn(rng, 5, Dm)
    with pytest.raises(vkattn.Error, match="dropout 0.1 in training mode"):
        m(x, x, x)
    m.eval()
    y, w = m(x, x, x, is_causal=True)
    mask = np.triu(np.ones((5, 5), bool), 1)
    y_mask, w_mask = m(x, x, x, attn_mask=mask)
    assert y.shape == (5, Dm) and w.shape == (5, 5)
    close(y, y_mask, 1e-6)
    close(w, w_mask, 1e-6)
    assert np.all(w[np.triu_indices(5, 1)] == 0)
    yb, _ = m(x[None], x[None], x[None], is_causal=True)
    close(yb[0], y, 1e-6)
    with pytest.raises(vkattn.Error, match="dtype 'f64'"):
        vkattn.MultiheadAttention(Dm, H, dtype="f64", device=dropin_ctx)
    with pytest.raises(vkattn.Error, match="device 'cuda'"):
        vkattn.MultiheadAttention(Dm, H, device="cuda")


def test_against_torch(dropin_ctx, rng):
    torch = pytest.importorskip("torch")
    Dm, H, L, S, B = 32, 4, 6, 9, 2
    for opts in (dict(), dict(add_bias_kv=True, add_zero_attn=True, kdim=24, vdim=40),
                 dict(batch_first=True, bias=False)):
        torch.manual_seed(len(opts))
        t = torch.nn.MultiheadAttention(Dm, H, **opts).eval()
        m = vkattn.MultiheadAttention(Dm, H, device=dropin_ctx, **opts).eval()
        m.load_state_dict(t.state_dict())
        assert m.param_count()["total"] == sum(p.numel() for p in t.parameters())
        bf = opts.get("batch_first", False)
        shape = lambda n, e: (B, n, e) if bf else (n, B, e)  # noqa: E731
        q = torch.randn(*shape(L, Dm))
        k = torch.randn(*shape(S, opts.get("kdim", Dm)))
        v = torch.randn(*shape(S, opts.get("vdim", Dm)))
        kpm = torch.zeros(B, S, dtype=torch.bool)
        kpm[1, -3:] = True
        attn = torch.randn(L, S) * 0.5
        for avg in (True, False):
            ty, tw = t(q, k, v, key_padding_mask=kpm, attn_mask=attn, average_attn_weights=avg)
            y, w = m(q, k, v, key_padding_mask=kpm, attn_mask=attn, average_attn_weights=avg)
            assert isinstance(y, torch.Tensor)
            close(y.numpy(), ty.detach().numpy(), 2e-4)
            close(w.numpy(), tw.detach().numpy(), 2e-4)
