"""The start-up self-test from Python: Context.self_test(), and the
constructor's kernel choices, against what the context reports using."""
import numpy as np
import pytest

import vkattn

FEATURES = ("subgroup_kernels", "shared_kernels", "texel_inputs", "storage_16bit",
            "coopmat_kernels")


def test_report(ctx):
    rep = ctx.self_test()
    assert rep["source"] in ("ran", "cached")
    assert rep["every_op_has_a_family"]
    assert set(rep["features"]) == set(FEATURES)
    names = [c["name"] for c in rep["checks"]]
    assert "subgroup.add_one" in names and "shared.barrier" in names
    for c in rep["checks"]:
        f = rep["features"][c["feature"]]
        if c["checked"] and not c["passed"]:
            assert not f["works"] and c["name"] in f["why"]
    # exactly one family is on, and it works
    sg, sh = rep["features"]["subgroup_kernels"], rep["features"]["shared_kernels"]
    assert sg["on"] != sh["on"]
    assert (sg if sg["on"] else sh)["works"]


def test_run_now_and_skip():
    with vkattn.Context(validate=True, self_test=False) as c:
        assert c.self_test()["source"] == "skipped"
        rep = c.self_test(run=True)
        assert rep["source"] == "ran"
        assert any(ch["checked"] for ch in rep["checks"])
        assert c.validation_counts() == (0, 0)


@pytest.mark.parametrize("kernels,texel", [("shared", False), ("shared", True), ("auto", False)])
def test_forced_choices_compute_the_same(rng, kernels, texel):
    q = rng.standard_normal((1, 4, 6, 32)).astype(np.float32)
    k = rng.standard_normal((1, 2, 9, 32)).astype(np.float32)
    v = rng.standard_normal((1, 2, 9, 32)).astype(np.float32)
    with vkattn.Context(validate=True) as c:
        want = c.attention(q, k, v, causal=True)
    with vkattn.Context(validate=True, kernels=kernels, texel_buffers=texel) as c:
        rep = c.self_test()
        assert rep["features"]["shared_kernels"]["on"] == (kernels == "shared")
        if not texel:
            assert not rep["features"]["texel_inputs"]["on"]
            assert "VKATTN_CONTEXT_NO_TEXEL_BUFFERS" in rep["features"]["texel_inputs"]["why"] \
                or not rep["features"]["texel_inputs"]["works"]
        got = c.attention(q, k, v, causal=True)
        assert c.validation_counts() == (0, 0)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5)


def test_bad_kernels():
    with pytest.raises(vkattn.Error, match="kernels='sideways'"):
        vkattn.Context(kernels="sideways")


def test_coopmat_forced_or_refused(rng):
    """kernels="coopmat": the cooperative-matrix kernels where the device has
    them (then the same results within f32's tolerance), else an error that
    says what is missing (the device record's coopmat_why)."""
    q = rng.standard_normal((1, 4, 19, 32)).astype(np.float32)
    k = rng.standard_normal((1, 2, 23, 32)).astype(np.float32)
    v = rng.standard_normal((1, 2, 23, 32)).astype(np.float32)
    with vkattn.Context(validate=True) as c:
        want = c.attention(q, k, v, causal=True)
        info = c.device
    assert isinstance(info["coopmat_shapes"], list)
    if info["coopmat_shape"] is None:
        assert info["coopmat_why"]
        with pytest.raises(vkattn.Error, match="coopmat"):
            vkattn.Context(kernels="coopmat")
        return
    with vkattn.Context(validate=True, kernels="coopmat") as c:
        rep = c.self_test()
        assert rep["features"]["coopmat_kernels"]["on"]
        assert c.device["coopmat_kernels"]
        got = c.attention(q, k, v, causal=True)
        assert c.validation_counts() == (0, 0)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-4)
