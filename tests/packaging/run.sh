#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds and runs two outside
# projects against it: one through find_package(vkattn), one through
# pkg-config. With a shared library, also checks that it exports only the
# public API (vkattn_* symbols).
#   tests/packaging/run.sh <build-dir> <source-dir>
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" > "$tmp/install.log"
pc=$(find "$prefix" -name vkattn.pc | head -n 1)
libdir=$(dirname "$(dirname "$pc")")
[[ -f "$prefix/include/vkattn.h" && -n "$pc" ]] || { echo "install is missing vkattn.h or vkattn.pc"; exit 1; }
[[ -f "$libdir/cmake/vkattn/vkattnConfig.cmake" && -f "$libdir/cmake/vkattn/vkattnConfigVersion.cmake" ]] ||
  { echo "install is missing the CMake package files"; exit 1; }
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

echo "== find_package(vkattn)"
cmake -S "$src/tests/packaging/cmake_consumer" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/cmake.log" ||
  { cat "$tmp/cmake.log"; exit 1; }
cmake --build "$tmp/cmake" > "$tmp/cmake-build.log" || { cat "$tmp/cmake-build.log"; exit 1; }
"$tmp/cmake/consumer"

echo "== pkg-config vkattn"
export PKG_CONFIG_PATH=$(dirname "$pc")
static=--static
ls "$libdir"/libvkattn.so* > /dev/null 2>&1 && static=
cc -std=c11 -o "$tmp/consumer-pc" "$src/tests/packaging/consumer.c" $(pkg-config --cflags vkattn) \
  $(pkg-config --libs $static vkattn) -lm
"$tmp/consumer-pc"

if [[ -z "$static" ]]; then
  echo "== exported symbols of $(basename "$(ls "$libdir"/libvkattn.so.*.*)")"
  exported=$(nm -D --defined-only "$libdir/libvkattn.so" | awk '{print $3}')
  others=$(grep -v '^vkattn_' <<< "$exported" || true)
  echo "$(wc -l <<< "$exported") symbols, all vkattn_*: $([[ -z "$others" ]] && echo yes || echo no)"
  [[ -z "$others" ]] || { echo "exported besides the public API:"; echo "$others"; exit 1; }
fi
echo "packaging ok"
