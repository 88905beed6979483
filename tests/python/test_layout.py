"""The ctypes structs mirror the C header: sizes and offsets from a C compiler."""
import ctypes
import os
import shutil
import subprocess

import pytest

from vkattn import _lib

INCLUDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include")


def test_structs_match_the_header(tmp_path):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <vkattn.h>",
             "int main(void) {"]
    for cname, cls in _lib.STRUCTS.items():
        lines.append('printf("%s %%zu\\n", sizeof(%s));' % (cname, cname))
        for field, _ in cls._fields_:
            lines.append('printf("%s.%s %%zu\\n", offsetof(%s, %s));'
                         % (cname, field, cname, field))
    lines += ["return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-I", INCLUDE, str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    c = dict(line.rsplit(" ", 1) for line in out.splitlines())
    mismatches = []
    for cname, cls in _lib.STRUCTS.items():
        if int(c[cname]) != ctypes.sizeof(cls):
            mismatches.append("sizeof(%s): C %s, ctypes %d" % (cname, c[cname],
                                                               ctypes.sizeof(cls)))
        for field, _ in cls._fields_:
            off = getattr(cls, field).offset
            if int(c["%s.%s" % (cname, field)]) != off:
                mismatches.append("%s.%s: C %s, ctypes %d"
                                  % (cname, field, c["%s.%s" % (cname, field)], off))
    assert not mismatches, "\n".join(mismatches)


def test_last_fields_end_the_structs():
    """The structs other work appends to end with the field mirrored last."""
    for cls in (_lib.AttentionArgs, _lib.MhaForwardArgs, _lib.MhaStepArgs,
                _lib.KvAttentionArgs, _lib.RefAttentionArgs, _lib.RefMhaArgs):
        name, typ = cls._fields_[-1]
        end = getattr(cls, name).offset + ctypes.sizeof(typ)
        assert ctypes.sizeof(cls) - end < ctypes.alignment(cls)
