#!/usr/bin/env bash
# Installs, with apt-get, the Debian 12 packages vkattn needs that are missing.
# Already complete: does nothing. Not root and something missing: prints the
# exact command to run and exits 1.
set -euo pipefail

packages=(
  build-essential        # C compiler, make
  cmake                  # build system (3.25 on Debian 12)
  pkg-config             # finds cmocka; vkattn.pc for consumers
  libvulkan-dev          # Vulkan loader and headers
  mesa-vulkan-drivers    # lavapipe: Mesa's CPU Vulkan driver
  chromium-common        # SwiftShader: Google's CPU Vulkan driver (/usr/lib/chromium)
  vulkan-validationlayers  # VK_LAYER_KHRONOS_validation, on in every test
  glslang-tools          # glslangValidator: GLSL -> SPIR-V at build time
  spirv-tools            # spirv-val: checks every SPIR-V module at build time
  libcmocka-dev          # unit tests
  python3                # tools/check_layers.py (the layering check the tests run)
  clang-format           # tools/format.sh --check (the tests run it)
  clang                  # libFuzzer harnesses (tools/fuzz.sh, tests/fuzz; tools/test.sh)
  libclang-rt-14-dev     # clang's libFuzzer and sanitizer runtimes for those
  libcjson-dev           # cJSON: the JSON header of .safetensors files (tools/safetensors)
  libcairo2-dev          # cairo: PNG and SVG pictures of attention weights (tools/viz)
  fonts-dejavu-core      # ... and a font for their labels (cairo finds it through fontconfig)
  python3-numpy          # the Python package (python/vkattn): arrays in and out
  python3-pytest         # its tests (tests/python), run by ctest on the shared build
  python3-venv           # ... which install it with pip into a venv
  python3-setuptools     # (pip install --no-build-isolation uses Debian's setuptools
  python3-wheel          #  and wheel, as python/README.md documents)
  python3-torch          # tests/python's comparisons with PyTorch (vkattn.torch's gradients)
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  echo "vkattn needs these Debian packages: ${missing[*]}" >&2
  echo "Run as root:  apt-get update && $cmd" >&2
  exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
