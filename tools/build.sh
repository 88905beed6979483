#!/usr/bin/env bash
# Installs what is missing (tools/install-deps.sh), configures and builds.
#   tools/build.sh [build-dir [extra cmake args...]]     default build dir: build
# Compiler output goes to <build-dir>.log and is printed only on failure.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${1:-build}
shift || true
bash "$root/tools/install-deps.sh"
log="$root/$dir.log"
if ! { cmake -S "$root" -B "$root/$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" &&
       cmake --build "$root/$dir" -j "$(nproc)"; } > "$log" 2>&1; then
  cat "$log"
  echo "build of $dir failed (log: $log)" >&2
  exit 1
fi
echo "built $dir/ (log: $dir.log)"
