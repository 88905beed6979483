"""vkattn.viz.save: pictures of known weights, read back by a small PNG reader
(zlib and the five PNG filters) and sampled at the cells the library's own
layout (vkattn_viz_measure) places: size, colours, hidden cells, errors."""
import ctypes
import os
import shutil
import struct
import subprocess
import zlib

import numpy as np
import pytest

import vkattn
from vkattn import viz

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
HIGH, LOW, HIDDEN = (253, 231, 37), (68, 1, 84), (200, 200, 200)  # viridis' ends; grey


def read_png(path):
    """(width, height, rows of (r, g, b)) of an 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height, depth, color = struct.unpack(">IIBB", data[16:26])
    assert depth == 8 and color in (2, 6)
    bpp = 3 if color == 2 else 4
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, rows, bpp


class Geometry(ctypes.Structure):
    """vkattn_viz_geometry of tools/viz/viz.h."""
    _fields_ = [(n, ctypes.c_uint32) for n in (
        "width", "height", "tiles", "cols", "rows", "q_cells", "k_cells", "q_block", "k_block",
        "cell_px", "tile_x0", "tile_y0", "tile_dx", "tile_dy")] + [
        ("hidden_rgb", ctypes.c_uint8 * 3), ("low_rgb", ctypes.c_uint8 * 3),
        ("high_rgb", ctypes.c_uint8 * 3), ("top", ctypes.c_float)]


def measure(w, hidden=None, average=False):
    """The layout of weights [H, Tq, Tk] as save draws them (no tokens, no title)."""
    lib = viz._library()
    lib.vkattn_viz_measure.argtypes = [ctypes.POINTER(viz.VizDesc), ctypes.POINTER(Geometry),
                                       ctypes.c_char_p, ctypes.c_size_t]
    w = np.ascontiguousarray(w, dtype=np.float32)
    d = viz.VizDesc(weights=w.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), heads=w.shape[0],
                    q_len=w.shape[1], k_len=w.shape[2], average=average)
    if hidden is not None:
        hidden = np.ascontiguousarray(hidden, dtype=np.bool_)
        d.hidden = hidden.ctypes.data_as(ctypes.POINTER(ctypes.c_bool))
        d.hidden_heads = 1
    g = Geometry()
    err = ctypes.create_string_buffer(512)
    assert lib.vkattn_viz_measure(ctypes.byref(d), ctypes.byref(g), err, 512) == 0, err.value
    return g


def cell(png, g, t, i, j):
    _, _, rows, bpp = png
    x = g.tile_x0 + (t % g.cols) * g.tile_dx + j * g.cell_px + g.cell_px // 2
    y = g.tile_y0 + (t // g.cols) * g.tile_dy + i * g.cell_px + g.cell_px // 2
    return tuple(rows[y][x * bpp:x * bpp + 3])


def close(got, want):
    return all(abs(a - b) <= 1 for a, b in zip(got, want))


def causal_weights(heads=3, t=6):
    """Softmax weights of a causal layer: head h peaks h keys back."""
    w = np.zeros((heads, t, t), np.float32)
    for h in range(heads):
        for i in range(t):
            s = np.array([-abs(i - h - j) * 2.0 for j in range(i + 1)])
            e = np.exp(s - s.max())
            w[h, i, :i + 1] = e / e.sum()
    return w, np.triu(np.ones((t, t), bool), 1)


def test_save_png(tmp_path):
    w, hidden = causal_weights()
    path = tmp_path / "w.png"
    vkattn.viz.save(w, str(path), tokens=["a", "b", "c", "d", "e", "f"], hidden=hidden,
                    title="three heads")
    png = read_png(str(path))
    g = measure(w, hidden)
    assert (png[0], png[1]) == (g.width, g.height)
    assert (g.tiles, g.cols, g.rows) == (3, 2, 2)
    for t in range(3):
        assert close(cell(png, g, t, 0, 0), HIGH)      # query 0 sees only key 0: weight 1
        assert close(cell(png, g, t, 2, 4), HIDDEN)    # above the diagonal
    # viridis' green rises with the weight: head h is brightest h keys back
    assert cell(png, g, 0, 5, 5)[1] > cell(png, g, 0, 5, 4)[1]
    assert cell(png, g, 2, 5, 3)[1] > max(cell(png, g, 2, 5, 5)[1], cell(png, g, 2, 5, 2)[1])
    assert close(cell(png, g, 2, 5, 0), LOW)  # e^-6 of the peak: the bottom colour
    # [B, H, Tq, Tk] draws batch row 0: the same picture
    path4 = tmp_path / "w4.png"
    vkattn.viz.save(np.stack([w, w * 0]), str(path4), tokens=list("abcdef"), hidden=hidden,
                    title="three heads")
    assert path4.read_bytes() == path.read_bytes()


def test_average_and_svg(tmp_path):
    w, hidden = causal_weights()
    vkattn.viz.save(w, str(tmp_path / "m.png"), average=True, hidden=hidden)
    png = read_png(str(tmp_path / "m.png"))
    g = measure(w, hidden, average=True)
    assert (png[0], png[1]) == (g.width, g.height) and g.tiles == 1
    assert close(cell(png, g, 0, 1, 2), HIDDEN)
    vkattn.viz.save(w.mean(0), str(tmp_path / "m.svg"), key_tokens=list("uvwxyz"))
    head = (tmp_path / "m.svg").read_bytes()[:5]
    assert head in (b"<?xml", b"<svg ")


def test_errors_leave_no_file(tmp_path):
    w, _ = causal_weights()
    bad = w.copy()
    bad[1, 2, 0] = np.nan
    with pytest.raises(vkattn.InvalidInput, match=r"head 1, query 2, key 0\] is nan"):
        vkattn.viz.save(bad, str(tmp_path / "nan.png"))
    with pytest.raises(vkattn.InvalidInput, match="VKATTN_VIZ_ERROR_FORMAT"):
        vkattn.viz.save(w, str(tmp_path / "w.jpg"))
    with pytest.raises(vkattn.InvalidInput, match="tokens has 2 entries, expected 6"):
        vkattn.viz.save(w, str(tmp_path / "t.png"), tokens=["a", "b"])
    with pytest.raises(vkattn.InvalidInput, match="hidden shaped"):
        vkattn.viz.save(w, str(tmp_path / "h.png"), hidden=np.zeros((5, 5), bool))
    with pytest.raises(vkattn.Error, match="VKATTN_VIZ_ERROR_IO"):
        vkattn.viz.save(w, str(tmp_path / "missing" / "w.png"))
    assert os.listdir(str(tmp_path)) == []


def test_desc_matches_the_header(tmp_path):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "viz/viz.h"',
             "int main(void) {",
             'printf("size %zu\\n", sizeof(vkattn_viz_desc));',
             'printf("geometry %zu\\n", sizeof(vkattn_viz_geometry));']
    for field, _ in viz.VizDesc._fields_:
        lines.append('printf("%s %%zu\\n", offsetof(vkattn_viz_desc, %s));' % (field, field))
    lines += ["return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-I", TOOLS, str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    c = dict(line.rsplit(" ", 1) for line in out.splitlines())
    assert int(c["size"]) == ctypes.sizeof(viz.VizDesc)
    assert int(c["geometry"]) == ctypes.sizeof(Geometry)
    for field, _ in viz.VizDesc._fields_:
        assert int(c[field]) == getattr(viz.VizDesc, field).offset, field
