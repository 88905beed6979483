"""vkattn.safetensors and MultiheadAttention.load_safetensors: files
written byte by byte here (8-byte little-endian header length, JSON header,
raw data) load into the arrays that went in; a layer loaded from a file
equals the same layer from load_state_dict bit for bit (and torch's
nn.MultiheadAttention when importable); corrupt and truncated files raise
vkattn.InvalidInput naming the file and tensor."""
import json
import os
import struct

import numpy as np
import pytest

import vkattn
from conftest import close, randn
from test_mha import hf_state, np_mha


def write_raw(path, entries, metadata=None, pad=8, tail=b""):
    """entries: (name, dtype, shape, bytes) laid out in order."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % pad)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data + tail)


def bf16_bits(a):
    """Round to nearest even to bfloat16 bits (uint16)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def test_round_trip_every_dtype(tmp_path, rng):
    arrays = {"f64": rng.standard_normal((2, 3)), "f32": randn(rng, 4),
              "f16": randn(rng, 3, 1, 2).astype(np.float16), "i64": np.arange(5),
              "i32": np.arange(6, dtype=np.int32).reshape(2, 3),
              "i16": np.array([-3, 7], dtype=np.int16), "i8": np.array([-128, 127], np.int8),
              "u8": np.arange(4, dtype=np.uint8), "b": np.array([True, False, True]),
              "scalar": np.float32(2.5), "empty": np.zeros((0, 4), np.float32)}
    p = tmp_path / "all.safetensors"
    vkattn.safetensors.save(p, arrays, metadata={"format": "pt"})
    with open(p, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        assert n % 8 == 0 and json.loads(f.read(n))["__metadata__"] == {"format": "pt"}
    got = vkattn.safetensors.load(p)
    assert list(got) == list(arrays)
    for k, a in arrays.items():
        a = np.asarray(a)
        assert got[k].dtype == a.dtype and got[k].shape == a.shape
        assert np.array_equal(got[k], a), k
    assert list(vkattn.safetensors.load(p, prefix="i")) == ["i64", "i32", "i16", "i8"]


def test_bf16_widens_exactly(tmp_path):
    bits = np.arange(0, 65536, dtype=np.uint32).astype(np.uint16)
    p = tmp_path / "bf.safetensors"
    write_raw(p, [("w", "BF16", (256, 256), bits.tobytes())])
    w = vkattn.safetensors.load(p)["w"]
    assert w.dtype == np.float32 and w.shape == (256, 256)
    want = (bits.astype(np.uint32) << 16).view(np.float32).reshape(256, 256)
    assert np.array_equal(w.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("names", ["hf", "torch"])
@pytest.mark.parametrize("store", ["F32", "F16", "BF16"])
def test_layer_from_file_equals_state_dict(ctx, rng, tmp_path, names, store):
    Dm, Hq, Hkv = 32, 4, (2 if names == "hf" else 4)
    w, sd = hf_state(rng, Dm, Hq, Hkv, 8, True)
    prefix = "model.layers.0.self_attn." if names == "hf" else "encoder.attn."
    if names == "torch":
        sd = {prefix + "in_proj_weight": np.concatenate([w["wq"], w["wk"], w["wv"]]),
              prefix + "in_proj_bias": np.concatenate([w["bq"], w["bk"], w["bv"]]),
              prefix + "out_proj.weight": w["wo"], prefix + "out_proj.bias": w["bo"]}
    # another layer's tensor in the same file, outside the prefix
    sd["model.layers.1.self_attn.q_proj.weight"] = randn(rng, Hq * 8, Dm)
    entries, widened = [], {}
    for k, a in sd.items():
        if store == "F32":
            raw, wide = a.tobytes(), a
        elif store == "F16":
            h = a.astype(np.float16)
            raw, wide = h.tobytes(), h.astype(np.float32)
        else:
            b = bf16_bits(a)
            raw, wide = b.tobytes(), (b.astype(np.uint32) << 16).view(np.float32)
        entries.append((k, store, a.shape, raw))
        widened[k] = wide
    p = tmp_path / "layer.safetensors"
    write_raw(p, entries, metadata={"format": "pt"})
    x = randn(rng, 2, 6, Dm)
    kw = dict(num_kv_heads=Hkv)
    from_file = vkattn.MultiheadAttention(ctx, Dm, Hq, **kw).load_safetensors(p, prefix=prefix)
    from_dict = vkattn.MultiheadAttention(ctx, Dm, Hq, **kw).load_state_dict(widened, prefix)
    y = from_file(x, causal=True)
    assert np.array_equal(y, from_dict(x, causal=True))
    wf = {k: v for k, v in from_dict.state_dict().items()}
    ref = {"wq": wf["q_proj.weight"], "wk": wf["k_proj.weight"], "wv": wf["v_proj.weight"],
           "wo": wf["o_proj.weight"], "bq": wf["q_proj.bias"], "bk": wf["k_proj.bias"],
           "bv": wf["v_proj.bias"], "bo": wf["o_proj.bias"]}
    close(y, np_mha(x, ref, Hq, Hkv, causal=True), 2e-4)


def test_torch_state_dict_through_a_file(ctx, rng, tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    Dm, H = 32, 4
    m = torch.nn.MultiheadAttention(Dm, H, batch_first=True).eval()
    with torch.no_grad():
        m.in_proj_bias.normal_()
        m.out_proj.bias.normal_()
    p = tmp_path / "mha.safetensors"
    vkattn.safetensors.save(p, {"attn." + k: v.detach() for k, v in m.state_dict().items()})
    layer = vkattn.MultiheadAttention(ctx, Dm, H).load_safetensors(p, prefix="attn.")
    x = torch.from_numpy(randn(rng, 2, 6, Dm))
    with torch.no_grad():
        ty = m(x, x, x, need_weights=False)[0].numpy()
    close(layer(x), ty, 2e-4)


def good_entries():
    return [("a", "F32", (2,), struct.pack("<2f", 1, 2)), ("b", "U8", (3,), b"xyz")]


@pytest.mark.parametrize("edit,says", [
    (lambda raw: raw[:-1], "are not inside the data section"),
    (lambda raw: raw + b"!", "1 bytes after the last tensor"),
    (lambda raw: raw[:5], "too short"),
    (lambda raw: struct.pack("<Q", 10 ** 9) + raw[8:], "over the limit"),
    (lambda raw: struct.pack("<Q", len(raw)) + raw[8:], "runs past the end"),
    (lambda raw: raw[:8] + b"[" + raw[9:], "not a JSON object"),
    (lambda raw: raw[:8] + raw[8:].replace(b'"U8"', b'"X8"', 1), 'dtype "X8"'),
    (lambda raw: raw[:8] + raw[8:].replace(b"[3]", b"[4]", 1), "span 3 bytes but"),
    (lambda raw: raw[:8] + raw[8:].replace(b'"b"', b'"a"', 1), '"a" is named twice'),
    (lambda raw: raw[:8] + raw[8:].replace(b"[8, 11]", b"[7, 10]", 1), "overlaps"),
    (lambda raw: raw[:8] + raw[8:].replace(b"{", b"{,", 1), "not valid JSON"),
])
def test_corrupt_files_refused(tmp_path, edit, says):
    p = tmp_path / "ok.safetensors"
    write_raw(p, good_entries())
    raw = p.read_bytes()
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(edit(raw))
    with pytest.raises(vkattn.InvalidInput) as e:
        vkattn.safetensors.load(bad)
    assert str(bad) in str(e.value) and says in str(e.value), str(e.value)
    assert isinstance(e.value, ValueError)


def test_hole_metadata_and_missing(tmp_path):
    p = tmp_path / "hole.safetensors"
    with open(p, "wb") as f:
        text = json.dumps({"a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}}).encode()
        f.write(struct.pack("<Q", len(text)) + text + b"ab")
    with pytest.raises(vkattn.InvalidInput, match="bytes 0 to 1 of the data belong to no"):
        vkattn.safetensors.load(p)
    write_raw(p, good_entries(), metadata={"n": 1})
    with pytest.raises(vkattn.InvalidInput, match='"__metadata__" entry "n" is not a string'):
        vkattn.safetensors.load(p)
    with pytest.raises(vkattn.InvalidInput, match="cannot open"):
        vkattn.safetensors.load(tmp_path / "missing.safetensors")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(vkattn.InvalidInput, match="not a regular file"):
        vkattn.safetensors.load(fifo)
    write_raw(p, [("f8", "F8_E4M3", (2,), b"\x01\x02")])
    with pytest.raises(vkattn.InvalidInput, match="numpy cannot hold"):
        vkattn.safetensors.load(p)


def test_layer_errors_name_the_tensor(ctx, rng, tmp_path):
    w, sd = hf_state(rng, 32, 4, 4, 8, False)
    p = tmp_path / "l.safetensors"
    del sd["model.layers.0.self_attn.k_proj.weight"]
    vkattn.safetensors.save(p, sd)
    layer = vkattn.MultiheadAttention(ctx, 32, 4, bias=False)
    with pytest.raises(vkattn.InvalidInput, match="no k weight"):
        layer.load_safetensors(p, prefix="model.layers.0.self_attn.")
    with pytest.raises(vkattn.InvalidInput, match="has dtype"):
        vkattn.safetensors.save(tmp_path / "c.safetensors", {"c": np.zeros(2, np.complex64)})
    assert not (tmp_path / "c.safetensors").exists()
