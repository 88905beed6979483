"""Reading and writing .safetensors files (huggingface/safetensors' format)
with numpy, no other package needed.

The format: an 8-byte little-endian header length N, N bytes of a JSON
object, then the data. Each key but "__metadata__" names a tensor:
{"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, offsets
relative to the data, C order, little endian.

load() checks what the CLI's reader checks (tools/safetensors): the header
at most 100 MB and inside the file, a JSON object without repeated names,
every entry with a known dtype, a shape of non-negative integers and
offsets inside the data spanning exactly its bytes, no overlap, no hole,
nothing after the last tensor, "__metadata__" an object of strings. Any
failure raises vkattn.InvalidInput (a ValueError) naming the file and the
tensor.

    layer.load_safetensors("model.safetensors", prefix="model.layers.0.self_attn.")
    arrays = vkattn.safetensors.load("model.safetensors", prefix="encoder.")
"""
import json
import mmap
import os
import stat
import struct

import numpy as np

from ._errors import bad

MAX_HEADER = 100 * 1000 * 1000  # safetensors' own reader refuses more

# dtype -> (numpy dtype of the stored elements, element size); BF16 is read
# as uint16 bits and widened to float32 (exactly); F8 has no numpy dtype
_DTYPES = {
    "F64": (np.float64, 8), "F32": (np.float32, 4), "F16": (np.float16, 2),
    "BF16": (np.uint16, 2), "I64": (np.int64, 8), "I32": (np.int32, 4),
    "I16": (np.int16, 2), "I8": (np.int8, 1), "U8": (np.uint8, 1), "BOOL": (np.bool_, 1),
    "F8_E4M3": (None, 1), "F8_E5M2": (None, 1),
}
_WRITE = {np.dtype(np.float64): "F64", np.dtype(np.float32): "F32",
          np.dtype(np.float16): "F16", np.dtype(np.int64): "I64", np.dtype(np.int32): "I32",
          np.dtype(np.int16): "I16", np.dtype(np.int8): "I8", np.dtype(np.uint8): "U8",
          np.dtype(np.bool_): "BOOL"}


def _no_repeats(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise _Repeated(key)
        out[key] = value
    return out


class _Repeated(Exception):
    pass


def _uint(v):
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 2 ** 53


def parse_header(raw, path, data_size):
    """The tensors of a header (bytes): {name: (dtype, shape, begin, end)},
    in file order, every rule checked; raises InvalidInput."""
    def fail(msg):
        return bad("%s: %s" % (path, msg))
    if not raw.startswith(b"{"):
        raise fail("the header is not a JSON object (it must start with '{')")
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_repeats)
    except _Repeated as e:
        raise fail('tensor "%s" is named twice' % e.args[0]) from None
    except (UnicodeDecodeError, ValueError) as e:
        raise fail("the header is not valid JSON (%s)" % e) from None
    if not isinstance(header, dict):
        raise fail("the header is not a JSON object")
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            if not isinstance(entry, dict):
                raise fail('"__metadata__" is not an object')
            for k, v in entry.items():
                if not isinstance(v, str):
                    raise fail('"__metadata__" entry "%s" is not a string' % k)
            continue
        if not isinstance(entry, dict):
            raise fail('tensor "%s": not an object' % name)
        extra = set(entry) - {"dtype", "shape", "data_offsets"}
        if extra:
            raise fail('tensor "%s": unknown field "%s"' % (name, sorted(extra)[0]))
        dtype, shape, offs = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if not isinstance(dtype, str):
            raise fail('tensor "%s": "dtype" is missing or not a string' % name)
        if dtype not in _DTYPES:
            raise fail('tensor "%s": dtype "%s" is not one the format defines' % (name, dtype))
        if not isinstance(shape, list) or not all(_uint(d) for d in shape):
            raise fail('tensor "%s": "shape" is not a list of non-negative integers' % name)
        if len(shape) > 8:
            raise fail('tensor "%s": %d dimensions, more than 8' % (name, len(shape)))
        if not (isinstance(offs, list) and len(offs) == 2 and all(_uint(o) for o in offs)):
            raise fail('tensor "%s": "data_offsets" is not [begin, end] of two non-negative '
                       'integers' % name)
        begin, end = offs
        if begin > end or end > data_size:
            raise fail('tensor "%s": data_offsets [%d, %d] are not inside the data section '
                       '(%d bytes)' % (name, begin, end, data_size))
        need = _DTYPES[dtype][1]
        for d in shape:
            need *= d
        if end - begin != need:
            raise fail('tensor "%s": data_offsets span %d bytes but its dtype and shape need %d'
                       % (name, end - begin, need))
        tensors[name] = (dtype, tuple(shape), begin, end)
    at, last = 0, None
    for name, (_, _, begin, end) in sorted(tensors.items(), key=lambda kv: kv[1][2:]):
        if begin < at:
            raise fail('tensor "%s" overlaps tensor "%s"' % (name, last))
        if begin > at:
            raise fail('bytes %d to %d of the data belong to no tensor (before "%s")'
                       % (at, begin, name))
        at, last = end, name
    if at != data_size:
        raise fail("%d bytes after the last tensor belong to no tensor" % (data_size - at))
    return tensors


def load(path, prefix=""):
    """{name: numpy array} of the tensors whose names start with `prefix`
    (names kept whole). F16 stays float16, BF16 becomes float32 (exactly),
    the others their numpy dtype; F8 tensors cannot be read into numpy and
    are refused when selected. The arrays are copies: the file is closed on
    return."""
    path = os.fspath(path)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block the open
            raise bad("%s: not a regular file" % path)
        f = open(path, "rb")
    except OSError as e:
        raise bad("%s: cannot open: %s" % (path, e.strerror)) from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if size < 8:
            raise bad("%s: %d bytes: too short for the 8-byte header length" % (path, size))
        with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as m:
            (n,) = struct.unpack("<Q", m[:8])
            if n > MAX_HEADER:
                raise bad("%s: header length %d is over the limit of %d bytes"
                          % (path, n, MAX_HEADER))
            if n > size - 8:
                raise bad("%s: header length %d runs past the end of the file (%d bytes)"
                          % (path, n, size))
            tensors = parse_header(bytes(m[8:8 + n]), path, size - 8 - n)
            out = {}
            for name, (dtype, shape, begin, end) in tensors.items():
                if not name.startswith(prefix):
                    continue
                np_dtype = _DTYPES[dtype][0]
                if np_dtype is None:
                    raise bad('%s: tensor "%s" is %s, which numpy cannot hold'
                              % (path, name, dtype))
                start = 8 + n + begin
                a = np.frombuffer(m, dtype=np.dtype(np_dtype).newbyteorder("<"),
                                  count=(end - begin) // _DTYPES[dtype][1], offset=start)
                a = a.reshape(shape).astype(np_dtype, copy=True)
                if dtype == "BF16":
                    a = (a.astype(np.uint32) << 16).view(np.float32)
                out[name] = a
                del a
            return out


def save(path, tensors, metadata=None):
    """Writes {name: array} (float64/32/16, int64/32/16/8, uint8, bool; torch
    CPU tensors too) to `path` in file order, the header padded to 8 bytes.
    Written to a temporary beside `path` and renamed over it, so no partial
    file is ever left."""
    path = os.fspath(path)
    header, blobs, at = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, value in tensors.items():
        a = np.array(value, order="C")  # (ascontiguousarray would make a scalar 1-D)
        if a.dtype not in _WRITE:
            raise bad("save: tensor %r has dtype %s; safetensors.save writes %s"
                      % (name, a.dtype, ", ".join(sorted(set(_WRITE.values())))))
        raw = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": _WRITE[a.dtype], "shape": list(a.shape),
                        "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = "%s.%d.tmp" % (path, os.getpid())
    try:
        with open(tmp, "xb") as f:
            f.write(struct.pack("<Q", len(text)) + text)
            for raw in blobs:
                f.write(raw)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
