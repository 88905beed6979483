#!/usr/bin/env bash
# Builds the libFuzzer harnesses (build-fuzz/: clang, -DVKATTN_FUZZ=ON, only
# what they need) and runs them (docs/fuzzing.md).
#   tools/fuzz.sh [--seconds S] [target...]   run each target (default: all)
#                                             for S seconds (default 600)
#   tools/fuzz.sh --build-only                build only (tools/test.sh)
# Environment: VKATTN_SHADERS_FROM, another build directory of this source
# whose shaders to reuse (cmake/shaders.cmake; tools/test.sh sets it).
# Targets: npy tuning pipeline_cache safetensors cli (fuzz_ prefix optional). Each keeps
# the corpus it grows in build-fuzz/corpus/<target>, starting from the
# committed seeds in tests/fuzz/corpus/<target> (only read). Prints each
# target's final stats; after a crash prints the reproducer's path
# (build-fuzz/artifacts/<target>/) and, once all have run, exits 1.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=build-fuzz
all_targets=(npy tuning pipeline_cache safetensors cli)
seconds=600
build_only=0
targets=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --seconds)
      [[ $# -ge 2 && $2 =~ ^[0-9]+$ && $2 -gt 0 ]] || { echo "fuzz.sh: --seconds needs a positive integer" >&2; exit 2; }
      seconds=$2
      shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *)
      t=${1#fuzz_}
      [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "fuzz.sh: no target '$1' (targets: ${all_targets[*]})" >&2; exit 2; }
      targets+=("$t")
      shift ;;
  esac
done
[[ ${#targets[@]} -gt 0 ]] || targets=("${all_targets[@]}")

bash "$root/tools/install-deps.sh"
log="$root/$dir.log"
if ! { CC=clang cmake -S "$root" -B "$root/$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DVKATTN_FUZZ=ON -DVKATTN_BUILD_BENCH=OFF -DVKATTN_SHADERS_FROM="${VKATTN_SHADERS_FROM:-}" &&
       cmake --build "$root/$dir" -j "$(nproc)" --target vkattn_fuzz; } > "$log" 2>&1; then
  cat "$log"
  echo "build of $dir failed (log: $log)" >&2
  exit 1
fi
echo "built the fuzz targets in $dir/ (log: $dir.log)"
[[ $build_only -eq 1 ]] && exit 0

failed=()
for t in "${targets[@]}"; do
  exe="$root/$dir/tests/fuzz/fuzz_$t"
  corpus="$root/$dir/corpus/$t"
  artifacts="$root/$dir/artifacts/$t"
  out="$root/$dir/fuzz_$t.log"
  mkdir -p "$corpus" "$artifacts"
  echo "== fuzz_$t: $seconds s (corpus $dir/corpus/$t, log $dir/fuzz_$t.log)"
  rc=0
  "$exe" -max_total_time="$seconds" -timeout=20 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$corpus" "$root/tests/fuzz/corpus/$t" > "$out" 2>&1 || rc=$?
  # "#123456 DONE cov: 164 ft: 301 corp: 89/9310b lim: 1056 exec/s: 14456 rss: 386Mb"
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$out" | tail -1 || true)
  if [[ $rc -eq 0 && -n $done_line ]]; then
    read -r execs cov ft corp rate < <(sed -E \
      's/^#([0-9]+).*cov: ([0-9]+) ft: ([0-9]+) corp: ([0-9]+)\/.*exec\/s: ([0-9]+).*/\1 \2 \3 \4 \5/' <<< "$done_line")
    echo "fuzz_$t: $execs execs ($rate/s), cov $cov, ft $ft, corpus $corp inputs"
  else
    failed+=("fuzz_$t")
    tail -n 60 "$out"
    repro=$(sed -nE 's/.*Test unit written to (.*)$/\1/p' "$out" | tail -1)
    echo "fuzz_$t FAILED (status $rc; log $out)" >&2
    if [[ -n $repro ]]; then
      echo "reproducer: $repro" >&2
      echo "  rerun: $exe $repro   (VKATTN_FUZZ_VERBOSE=1 to see the CLI's output)" >&2
    fi
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz.sh: failed: ${failed[*]}" >&2
  exit 1
fi
