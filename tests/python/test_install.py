"""The package as installed: `cmake --install` into a temporary prefix finds its
library relative to itself (after the prefix moved, too), and
`pip install --no-build-isolation ./python` works in a venv with Debian's
setuptools, finding the library in the venv's lib/."""
import os
import shutil
import subprocess
import sys

import pytest

import vkattn

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CHECK = ("import vkattn, numpy as np; c = vkattn.Context(); "
         "print(vkattn.library_path); "
         "print(float(c.attention(*[np.ones((1, 1, 2, 8), np.float32)] * 3).sum()))")


def _build_dir():
    """The build tree whose python/ copy is imported (its _location.py)."""
    pkg = os.path.dirname(os.path.abspath(vkattn.__file__))
    build = os.path.dirname(os.path.dirname(pkg))
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        pytest.skip("not imported from a build tree's python/ folder")
    return build


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VKATTN_LIBRARY", "LD_LIBRARY_PATH")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def _run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, "%s\n%s\n%s" % (cmd, r.stdout, r.stderr)
    return r.stdout


def test_cmake_install_is_relocatable(tmp_path):
    build = _build_dir()
    _run(["cmake", "--install", build, "--prefix", str(tmp_path / "a")])
    shutil.move(str(tmp_path / "a"), str(tmp_path / "b"))
    site = tmp_path / "b" / "lib" / "python3" / "dist-packages"
    out = _run([sys.executable, "-c", CHECK], cwd=str(tmp_path),
               env=_clean_env(PYTHONPATH=str(site))).split()
    assert out[0].startswith(str(tmp_path / "b")) and float(out[1]) == 16.0


def test_pip_install_into_venv(tmp_path):
    build = _build_dir()
    pytest.importorskip("setuptools")  # Debian: python3-setuptools, python3-wheel
    pytest.importorskip("wheel")
    venv = tmp_path / "venv"
    r = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("no venv with pip here (python3-venv): " + r.stderr[-200:])
    _run(["cmake", "--install", build, "--prefix", str(venv)])
    src = tmp_path / "src"
    shutil.copytree(os.path.join(SOURCE, "python"), str(src),
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    _run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index", "-q",
          str(src)], env=_clean_env(PIP_NO_CACHE_DIR="1"))
    out = _run([str(venv / "bin" / "python"), "-c", CHECK], cwd=str(tmp_path),
               env=_clean_env()).split()
    assert out[0].startswith(str(venv)) and float(out[1]) == 16.0
