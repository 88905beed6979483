#!/usr/bin/env bash
# vkattn-bench, then PyTorch on the CPU for the same cases right after it (back to
# back, so both see the same machine state), joined by case name into a markdown
# table: case | ms | GFLOP/s or GB/s | peak_fraction | torch ms | speed-up vs torch.
#
#   tools/bench-vs-torch.sh [vkattn-bench arguments...]
#   tools/bench-vs-torch.sh --case attn_prefill_gqa_d128_t1024,layer_d1024_h16_t512 --reps 9
#   tools/bench-vs-torch.sh --icd build/lavapipe25/lvp_icd.json --case gemm_m1024_n6144_k4096
#
# --icd JSON (this script's own option, not passed on): run vkattn-bench on the
# Vulkan driver that ICD json names (VK_ICD_FILENAMES and VK_DRIVER_FILES), e.g.
# the Mesa 25 lavapipe of tools/lavapipe25.sh; the table's footer names it.
#
# Environment:
#   VKATTN_BENCH        the benchmark program (default: <repo>/build/bench/vkattn-bench)
#   VKATTN_TORCH_PEER   the PyTorch peer (default: <repo>/../shared/peers/torch_cpu.py)
#   VKATTN_PYTHON       the interpreter with torch (default: /usr/bin/python3, Debian's
#                       python3-torch installs there)
#   VKATTN_BENCH_OUT    directory that keeps both JSON streams (default: a temporary one)
#   VKATTN_DEVICE       passed on to vkattn-bench (which device)
# The peer only knows some of the cases; the others show "-" in the torch columns.
# speed-up = torch ms / vkattn ms (above 1: vkattn is faster). Medians both sides.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bench=${VKATTN_BENCH:-$root/build/bench/vkattn-bench}
peer=${VKATTN_TORCH_PEER:-$root/../shared/peers/torch_cpu.py}
python=${VKATTN_PYTHON:-/usr/bin/python3}

if [[ ! -x $bench ]]; then
  echo "bench-vs-torch: no benchmark program at $bench" >&2
  echo "  build it (tools/build.sh, or cmake --build build --target vkattn_bench)" >&2
  echo "  or point VKATTN_BENCH at it" >&2
  exit 2
fi
if [[ ! -f $peer ]]; then
  echo "bench-vs-torch: no PyTorch peer at $peer (set VKATTN_TORCH_PEER)" >&2
  exit 2
fi
if [[ ! -x $python ]]; then
  echo "bench-vs-torch: no Python interpreter at $python (set VKATTN_PYTHON)" >&2
  exit 2
fi
# The case names asked of vkattn-bench go to the peer too (it ignores unknown ones;
# with no names both run everything they know).
names=()
peak=0
args=()
while (($#)); do
  if [[ $1 == --icd ]]; then
    [[ $# -ge 2 && -f $2 ]] || { echo "bench-vs-torch: --icd needs an ICD json file (got '${2:-}')" >&2; exit 2; }
    export VK_ICD_FILENAMES=$2 VK_DRIVER_FILES=$2
    shift 2
  else
    args+=("$1")
    shift
  fi
done
set -- "${args[@]+"${args[@]}"}"
for ((i = 0; i < ${#args[@]}; i++)); do
  [[ ${args[i]} != --peak ]] || peak=1
  if [[ ${args[i]} == --case && $((i + 1)) -lt ${#args[@]} ]]; then
    IFS=, read -r -a list <<< "${args[i + 1]}"
    names+=("${list[@]}")
  elif [[ ${args[i]} == --list || ${args[i]} == --help || ${args[i]} == -h ]]; then
    exec "$bench" "$@"
  fi
done

if ! "$python" -c 'import torch' 2> /dev/null; then
  echo "bench-vs-torch: PyTorch is not installed for $python." >&2
  echo "  install Debian's package: apt-get install python3-torch" >&2
  echo "  (or set VKATTN_PYTHON to an interpreter that has torch)" >&2
  exit 2
fi
# Debian's torch calls whatever libblas.so.3 the alternatives system points at;
# with only the reference BLAS (netlib libblas3) its GEMMs run ~100x below an
# optimized one (2-3 instead of 180-230 GFLOP/s here), which would flatter vkattn.
blas=$("$python" - << 'EOF'
import os, torch
libs = {line.split()[-1] for line in open("/proc/self/maps") if ".so" in line}
paths = [os.path.realpath(p) for p in libs if "blas" in p.lower() or "mkl" in p.lower()]
fast = [p for p in paths if any(k in p.lower() for k in ("openblas", "mkl", "blis", "atlas"))]
print("optimized" if fast else "reference" if paths else "unknown")
EOF
)
if [[ $blas == reference ]]; then
  echo "bench-vs-torch: WARNING: torch uses the reference BLAS (netlib libblas3): its matrix" >&2
  echo "  products run ~100x slower than with an optimized BLAS, so speed-ups vs torch are" >&2
  echo "  inflated. Install one: apt-get install libopenblas0-pthread" >&2
fi

out=${VKATTN_BENCH_OUT:-}
if [[ -z $out ]]; then
  out=$(mktemp -d "${TMPDIR:-/tmp}/bench-vs-torch.XXXXXX")
fi
mkdir -p "$out"

echo "bench-vs-torch: ${VK_ICD_FILENAMES:+VK_ICD_FILENAMES=$VK_ICD_FILENAMES }$bench $*" >&2
"$bench" "$@" > "$out/vkattn.jsonl"
echo "bench-vs-torch: $python $peer ${names[*]}" >&2
if ((${#names[@]})); then
  "$python" "$peer" "${names[@]}" > "$out/torch.jsonl"
elif ((peak)); then
  : > "$out/torch.jsonl" # --peak without --case: the limit kernels alone, nothing to compare
else
  "$python" "$peer" > "$out/torch.jsonl"
fi
echo "bench-vs-torch: JSON lines in $out/vkattn.jsonl and $out/torch.jsonl" >&2

"$python" - "$out/vkattn.jsonl" "$out/torch.jsonl" "$blas" << 'EOF'
import json, sys

def rows(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                out.append(json.loads(line))
    return out

ours = rows(sys.argv[1])
peak = next((r for r in ours if r.get("case") == "peak"), None)
ours = [r for r in ours if r.get("case") != "peak"]
torch = {r["case"]: r for r in rows(sys.argv[2])}
print("| case | ms | GFLOP/s or GB/s | peak_fraction | torch ms | speed-up vs torch | limit |")
print("|---|---:|---:|---:|---:|---:|---|")
for r in ours:
    read = r.get("limit") == "read"
    rate = f'{r["gbps"]:.2f} GB/s' if read else f'{r["gflops"]:.1f} GFLOP/s'
    unit = "GB/s" if read else "GFLOP/s"
    limit = f'{r.get("limit", "?")} {r.get("limit_rate", 0):.1f} {unit}'
    if read and r.get("limit_binding"):
        limit += f' ({r["limit_binding"]})'
    t = torch.get(r["case"])
    tms = f'{t["ms"]:.2f}' if t else "-"
    speedup = f'{t["ms"] / r["ms"]:.2f}x' if t and r["ms"] > 0 else "-"
    print(f'| {r["case"]} | {r["ms"]:.2f} | {rate} | {r["peak_fraction"]:.3f} | {tms} | {speedup} | {limit} |')
first = ours[0] if ours else peak or {}
device = first.get("device", "?") + (f' ({first["driver"]})' if first.get("driver") else "")
peer = next(iter(torch.values()), None)
who = f'torch {peer["torch"]} on the CPU, {peer["threads"]} threads' if peer else "no torch case ran"
print()
print(f"vkattn on {device}; {who}. Medians; peak_fraction = rate / median rate of the "
      "same-process limit kernel (limit column).")
if sys.argv[3] == "reference":
    print("**torch ran on the reference BLAS (netlib libblas3, no optimized BLAS installed): its "
          "matrix products are ~100x slower than with OpenBLAS, so these speed-ups are inflated** "
          "(apt-get install libopenblas0-pthread).")
if peak:
    print(f'Limit kernels alone (--peak): FMA {peak["fma_gflops"]:.1f} GFLOP/s, best read '
          f'{peak["read_gbps"]:.2f} GB/s ({peak["read_binding"]}).')
EOF
