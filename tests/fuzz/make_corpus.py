#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz harnesses (corpus/<target>/): small
inputs, valid and a little off, that show each harness the formats it
fuzzes. Rerun after changing a harness's fixed values (the tuning device
line, the pipeline cache device) and commit the result:
    python3 tests/fuzz/make_corpus.py
"""
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def npy(descr, shape, data, version=1, fortran=False):
    """A .npy file as numpy.save writes it (64-byte aligned header)."""
    shape_text = "(" + "".join(f"{d}, " for d in shape)[:-2] + ("," if len(shape) == 1 else "") + ")"
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False", shape_text)
    pre = 10 if version == 1 else 12
    pad = 64 - (pre + len(header) + 1) % 64
    header = (header + " " * pad + "\n").encode()
    if version == 1:
        prefix = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header))
    else:
        prefix = b"\x93NUMPY\x02\x00" + struct.pack("<I", len(header))
    return prefix + header + data


def npy_corpus():
    f32 = struct.pack("<6f", 1.0, -2.5, 0.0, float("inf"), 3.25, -0.0)
    f16 = struct.pack("<6H", 0x3C00, 0xC100, 0x0000, 0x7C00, 0x7E00, 0x8001)
    u8 = bytes([0, 1, 2, 127, 200, 255])
    b1 = bytes([0, 1, 1, 0, 2, 255])
    files = {}
    for v in (1, 2):
        files[f"f32_2x3_v{v}.npy"] = npy("<f4", (2, 3), f32, v)
        files[f"f16_6_v{v}.npy"] = npy("<f2", (6,), f16, v)
        files[f"u1_3x2_v{v}.npy"] = npy("|u1", (3, 2), u8, v)
        files[f"b1_1x2x3_v{v}.npy"] = npy("|b1", (1, 2, 3), b1, v)
    files["f32_scalar.npy"] = npy("<f4", (), f32[:4])
    files["f32_empty_0x4.npy"] = npy("<f4", (0, 4), b"")
    files["f32_rank8.npy"] = npy("<f4", (1,) * 8, f32[:4])
    files["bad_big_endian.npy"] = npy(">f4", (1,), f32[:4])
    files["bad_fortran.npy"] = npy("<f4", (2, 3), f32, fortran=True)
    files["bad_truncated.npy"] = npy("<f4", (2, 3), f32[:20])
    return files


# The harness's device (fuzz_tuning.c): vendor, device, driver, uuid.
TUNING_DEVICE = "device 65541 0 1 6d6573612d6c767000112233445566ff"


def tuning_corpus():
    head = "vkattn-tuning 1\n" + TUNING_DEVICE + "\n"
    rec = [
        "2 1 8 64 1 0 0 0 3 1 0 2 0.1250",
        "1 3 2 1 0 0 0 0 7 0 0 1 1.5000",
        "3 0 1 128 4 1 0 0 2 1 4 3 12.0625",
        "2 1 8 64 1 0 0 0 4 1 0 2 0.0625",  # the same key again: replaces
    ]
    return {
        "one.txt": head + rec[0] + "\n",
        "several.txt": head + "\n".join(rec) + "\n",
        "two_devices.txt": head + rec[1] + "\ndevice 4318 9001 5 00112233445566778899aabbccddeeff\n"
        + rec[2] + "\n" + TUNING_DEVICE + "\n" + rec[2] + "\n",
        "malformed.txt": head + "2 1 8 64 1 0 0 0 3 1 0 2\n1 2 3 4294967296 0 0 0 0 0 0 0 0 1.0\n"
        + "2 1 8 64 1 0 0 0 3 1 0 2 nan\n2 1 8 64 1 0 0 0 3 1 0 2 1e3\n2  1 0 0 0 0 0 0 0 0 0 0 1\n",
        "no_newline.txt": head + rec[1],
        "crlf.txt": head.replace("\n", "\r\n") + rec[0] + "\r\n",
        "other_version.txt": "vkattn-tuning 2\n" + TUNING_DEVICE + "\n" + rec[0] + "\n",
    }


# The harness's device (fuzz_pipeline_cache.c).
PC_VENDOR, PC_DEVICE = 0x10DE, 0x2330
PC_UUID = bytes([0xA5] + list(range(1, 15)) + [0x5A])


def pc_header(size=32, version=1, vendor=PC_VENDOR, device=PC_DEVICE, uuid=PC_UUID):
    return struct.pack("<IIII", size, version, vendor, device) + uuid


def pipeline_cache_corpus():
    return {
        "match.bin": pc_header(),
        "match_with_data.bin": pc_header() + bytes(range(64)),
        "match_long_header.bin": pc_header(48) + bytes(16),
        "header_size_past_end.bin": pc_header(40),
        "header_size_small.bin": pc_header(16),
        "version_2.bin": pc_header(version=2),
        "other_vendor.bin": pc_header(vendor=0x1002),
        "other_device.bin": pc_header(device=0x2331),
        "other_uuid.bin": pc_header(uuid=bytes(16)),
        "short.bin": pc_header()[:31],
    }


def safetensors(tensors, metadata=None, pad=8, raw_header=None):
    """A .safetensors file: tensors is a list of (name, dtype, shape, bytes),
    laid out in order; the header padded with spaces to `pad` bytes."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = raw_header if raw_header is not None else json.dumps(header).encode()
    text += b" " * ((-len(text)) % pad)
    return struct.pack("<Q", len(text)) + text + data


def safetensors_corpus():
    f32 = struct.pack("<6f", 1.0, -2.5, 0.0, float("inf"), 3.25, -0.0)
    f16 = struct.pack("<4H", 0x3C00, 0xC100, 0x0001, 0x7E00)
    bf16 = struct.pack("<4H", 0x3F80, 0xC020, 0x0001, 0x7FC0)
    return {
        "one.safetensors": safetensors([("w", "F32", (2, 3), f32)]),
        "layer.safetensors": safetensors(
            [("q_proj.weight", "BF16", (2, 2), bf16), ("k_proj.weight", "F16", (2, 2), f16),
             ("v_proj.bias", "F32", (6,), f32), ("scalar", "F32", (), f32[:4]),
             ("empty", "I8", (0, 3), b""), ("ids", "I64", (1,), struct.pack("<q", 7))],
            metadata={"format": "pt"}),
        "meta_only.safetensors": safetensors([], metadata={"a": "b"}),
        "overlap.safetensors": struct.pack("<Q", 96) + json.dumps(
            {"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
             "b": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}}).encode().ljust(96)
            + b"abc",
        "bad_dtype.safetensors": safetensors([("x", "F4", (2,), b"ab")]),
        "truncated.safetensors": safetensors([("w", "F32", (2, 3), f32)])[:-5],
        "not_object.safetensors": safetensors([], raw_header=b"[1, 2]"),
    }


def cli_corpus():
    def args(*a):
        return "\0".join(a).encode()
    dev = ("--device", "0", "--validate", "-v", "--pipeline-cache", "pc.bin")
    return {
        "help.args": args("--help"),
        "version.args": args("version"),
        "info.args": args("info", "--json", "--device", "lavapipe"),
        "info_help.args": args("info", "-h"),
        "smoke.args": args("smoke", "--elements", "1024", *dev),
        "demo.args": args("demo", "--tokens", "16", "--verbose"),
        "demo_help.args": args("demo", "--help"),
        "attention.args": args("attention", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy",
                               "--out", "o.npy"),
        "attention_all.args": args("attention", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy",
                                   "--out", "o.npy", "--mask", "mask.npy", "--key-padding",
                                   "pad.npy", "--causal", "--scale", "0.125", "--dtype", "f16",
                                   "--weights-out", "w.npy", "--per-head", "--check", "--tune",
                                   "--tuning", "t.txt", *dev),
        "attention_half.args": args("attention", "--q", "h.npy", "--k", "k.npy", "--v", "v.npy",
                                    "--out", "o.npy", "--key-padding", "padb.npy"),
        "attention_missing.args": args("attention", "--q", "q.npy", "--k", "nothere.npy"),
        "attention_help.args": args("attention", "--help"),
        "mha.args": args("mha", "--x", "x.npy", "--heads", "2", "--wq", "w16.npy", "--wk",
                         "w16.npy", "--wv", "w16.npy", "--wo", "w16.npy", "--out", "y.npy"),
        "mha_gqa.args": args("mha", "--x", "x.npy", "--heads", "4", "--kv-heads", "2", "--wq",
                             "w16.npy", "--wk", "w8.npy", "--wv", "w8.npy", "--wo", "w16.npy",
                             "--bq", "b16.npy", "--bk", "b8.npy", "--bv", "b8.npy", "--bo",
                             "b16.npy", "--kv", "c.npy", "--out", "y.npy"),
        "mha_options.args": args("mha", "--x", "x.npy", "--heads", "2", "--wq", "w16.npy", "--wk",
                                 "w16.npy", "--wv", "w16.npy", "--wo", "w16.npy", "--mask",
                                 "mask.npy", "--key-padding", "pad.npy", "--dtype", "f32",
                                 "--weights-out", "w.npy", "--per-head", "--check", "--out",
                                 "y.npy"),
        "mha_prefill.args": args("mha", "--x", "x.npy", "--heads", "2", "--wq", "w16.npy", "--wk",
                                 "w16.npy", "--wv", "w16.npy", "--wo", "w16.npy", "--out",
                                 "y.npy", "--causal", "--prefill", "2", "--paged-block", "16",
                                 "--kv-splits", "2", "--tune", "--tuning", "t.txt"),
        "mha_help.args": args("mha", "-h"),
        "unknown.args": args("frobnicate", "--x"),
    }


def main():
    for name, files in [("npy", npy_corpus()), ("tuning", {k: v.encode() for k, v in tuning_corpus().items()}),
                        ("pipeline_cache", pipeline_cache_corpus()), ("cli", cli_corpus()),
                        ("safetensors", safetensors_corpus())]:
        d = os.path.join(HERE, "corpus", name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for fname, data in files.items():
            assert len(data) < 4096, fname
            # fuzz_cli takes at most 32 arguments after "vkattn"
            assert name != "cli" or data.count(b"\0") < 32, fname
            with open(os.path.join(d, fname), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
