#!/usr/bin/env bash
# The whole test suite: set up and build, check the formatting
# (tools/format.sh --check), run every test on every Vulkan
# implementation the machine has, Mesa 25's lavapipe included, and the golden,
# self-test and subgroup suites on the drivers' other shapes (lavapipe at
# widths 512 and 1024, Mesa 26.1's lavapipe with and without its quirk;
# tests/CMakeLists.txt) (ctest prints the summary), the core ops once under
# GPU-assisted validation among them (label gpuav: one long single-threaded
# compile, which ctest starts first, tests/test_costs.cmake); then the library
# built shared (packaging: install, find_package and pkg-config consumers, only
# vkattn_* symbols exported; the embedding example; the API-level suites);
# then everything again built with AddressSanitizer + UndefinedBehaviorSanitizer
# (but the packaging test: an outside consumer does not link the sanitizer runtimes).
# Last, the libFuzzer harnesses (tests/fuzz) for a fixed number of inputs each.
# Runs labelled `extended` are left out unless --all (tests/CMakeLists.txt says
# which and why: the slowest-compiling suites on Mesa 25's lavapipe,
# SwiftShader's sanitizer runs of suites whose host code lavapipe's cover, the
# three slowest CLI suites on SwiftShader and under the sanitizer);
# without --all the suites that stay on Mesa 25's lavapipe run every kernel
# policy's cases with its built-in kernels (VKATTN_TEST_POLICY_FLAGS_LAVAPIPE25=0,
# tests/support/test_policy.h): the other policies' kernels are the same
# SPIR-V, checked on lavapipe 22.3 and SwiftShader; SwiftShader runs the
# two storage-input policies (VKATTN_TEST_POLICIES_SWIFTSHADER=1,3) and the
# sanitizer build the default policy, then shared memory + storage inputs
# for the core ops' suites (lavapipe 22.3 runs all four).
#   tools/test.sh            all three builds, without the extended runs (CI)
#   tools/test.sh --all      all three builds, every test on every implementation
#   tools/test.sh --quick    the normal build only (combines with --all)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=$(nproc)
quick=0
all=0
select=(-LE extended)
for arg in "$@"; do
  case $arg in
  --quick) quick=1 ;;
  --all)
    select=()
    all=1
    ;;
  *)
    echo "usage: tools/test.sh [--quick] [--all] (unknown argument: $arg)" >&2
    exit 2
    ;;
  esac
done

# A stage's heading, with the seconds since the start (CI's log shows where
# the time goes).
stage() {
  echo "== $1 (${SECONDS} s in)"
}

# ctest in a build directory; when something fails, the failed tests run again
# one at a time so that their output ends the log (CI shows its tail).
run_ctest() {
  local dir=$1
  shift
  (cd "$root/$dir" && ctest --output-on-failure -j "$jobs" "$@") && return 0
  echo "== failed in $dir/, again one at a time:"
  (cd "$root/$dir" && ctest --rerun-failed --output-on-failure) || true
  return 1
}

# The third implementation, Mesa 25's lavapipe (tools/lavapipe25.sh), for the
# normal build's tests; before configuring, which looks for it. Required in CI
# (CI=true) unless VKATTN_NO_LAVAPIPE25=1; elsewhere the tests go on without it.
if ! bash "$root/tools/lavapipe25.sh" "$root/build/lavapipe25"; then
  if [[ "${CI:-}" == true && "${VKATTN_NO_LAVAPIPE25:-}" != 1 ]]; then
    echo "lavapipe25 is required in CI (set VKATTN_NO_LAVAPIPE25=1 to go without it)" >&2
    exit 1
  fi
  echo "== lavapipe25 not available: the tests run on the other implementations only"
fi
# Mesa 26.1's lavapipe and glslang 15 from Debian 13 (tools/lavapipe26.sh),
# for the implementations lavapipe26 and lavapipe26avx (tests/CMakeLists.txt);
# required in CI unless VKATTN_NO_LAVAPIPE26=1.
if ! bash "$root/tools/lavapipe26.sh" "$root/build/lavapipe26"; then
  if [[ "${CI:-}" == true && "${VKATTN_NO_LAVAPIPE26:-}" != 1 ]]; then
    echo "lavapipe26 is required in CI (set VKATTN_NO_LAVAPIPE26=1 to go without it)" >&2
    exit 1
  fi
  echo "== lavapipe26 not available: the tests run without Mesa 26.1"
fi
if ((!all)); then
  export VKATTN_TEST_POLICY_FLAGS_LAVAPIPE25=${VKATTN_TEST_POLICY_FLAGS_LAVAPIPE25:-0}
  # SwiftShader runs the two storage-input policies: where it differs from
  # lavapipe is its 16-bit values packed in 32-bit words (read by the storage
  # path of each family) and its subgroup of 4 (the subgroup family);
  # lavapipe runs all four (test_policy.h).
  export VKATTN_TEST_POLICIES_SWIFTSHADER=${VKATTN_TEST_POLICIES_SWIFTSHADER:-1,3}
fi
bash "$root/tools/build.sh" build
stage "formatting"
bash "$root/tools/format.sh" --check
stage "tests (build/)"
# The core ops once more under the validation layer's GPU-assisted mode, which
# reports out-of-bounds storage and texel accesses (tests/test_gpu_assisted.c,
# on Mesa 22.3's lavapipe; the other runs keep core and synchronization
# validation), run with the rest so that the other core is not left idle.
run_ctest build "${select[@]}"

if ((!quick)); then
  # The other builds reuse build/'s shaders instead of compiling the same
  # SPIR-V again (cmake/shaders.cmake, VKATTN_SHADERS_FROM), and test on the
  # three main implementations only (the drivers' other shapes are
  # build/'s: their code paths are the same).
  reuse=(-DVKATTN_SHADERS_FROM="$root/build" -DVKATTN_TEST_MORE_DRIVERS=OFF)
  bash "$root/tools/build.sh" build-shared -DBUILD_SHARED_LIBS=ON -DVKATTN_BUILD_BENCH=OFF "${reuse[@]}"
  stage "shared library (build-shared/)"
  # What a shared library changes is linking and the exported API: the
  # packaging consumers, the examples, the Python package (ctypes over every
  # struct it mirrors) and the plain layer suite; the layer's variants and
  # the decode suite run the same code as build/'s.
  run_ctest build-shared -R 'packaging|example|test_context|test_mha\.|test_embedding|test_python'

  bash "$root/tools/build.sh" build-asan -DVKATTN_SANITIZE=ON -DVKATTN_BUILD_BENCH=OFF "${reuse[@]}"
  stage "tests under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)"
  # Without --all, the suites that spread their cases over the kernel
  # policies run one of the four here (VKATTN_TEST_POLICIES, test_policy.h):
  # subgroup + texel inputs, the default; then the core ops' suites again
  # with shared memory + storage inputs, which between the two take each
  # side of both choices the host code makes (build/ runs all four).
  if ((!all)) && [[ -z "${VKATTN_TEST_POLICIES:-}" ]]; then
    VKATTN_TEST_POLICIES=0 run_ctest build-asan "${select[@]}"
    stage "the core ops' suites under the sanitizers, shared memory + storage inputs"
    VKATTN_TEST_POLICIES=3 run_ctest build-asan \
      -R '^(test_attention|test_linear|test_kv_attention|test_mha|test_decode)\.lavapipe$'
  else
    run_ctest build-asan "${select[@]}"
  fi

  # clang, only the harnesses and what they link; fixed runs from the seeds
  VKATTN_SHADERS_FROM="$root/build" bash "$root/tools/fuzz.sh" --build-only
  stage "fuzz targets (build-fuzz/)"
  run_ctest build-fuzz -L fuzz
fi
stage "done"
