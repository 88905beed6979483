#!/usr/bin/env bash
# The whole test suite: set up and build, run every test on every Vulkan
# implementation the machine has (ctest prints the summary), then the same
# suite built with AddressSanitizer + UndefinedBehaviorSanitizer.
#   tools/test.sh            both builds
#   tools/test.sh --quick    the normal build only
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=$(nproc)

bash "$root/tools/build.sh" build
echo "== tests (build/)"
(cd "$root/build" && ctest --output-on-failure -j "$jobs")

if [[ "${1:-}" != "--quick" ]]; then
  bash "$root/tools/build.sh" build-asan -DVKATTN_SANITIZE=ON -DVKATTN_BUILD_BENCH=OFF
  echo "== tests under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)"
  (cd "$root/build-asan" && ctest --output-on-failure -j "$jobs")
fi
