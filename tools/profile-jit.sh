#!/usr/bin/env bash
# Where a vkattn-bench case spends its time on a CPU Vulkan driver (lavapipe,
# SwiftShader): the shaders run as JIT code with no symbols, so this samples
# the running benchmark with perf, copies the hot JIT mappings out of the
# process with gdb, disassembles them with objdump and prints, per hot
# mapping, its share of the samples and its instruction mix (FP multiplies
# and adds, f16 conversions, stack spills, calls - lavapipe's texel fetches
# are calls). A developer's tool: not used by the build, the tests or CI.
#
#   tools/profile-jit.sh CASE [OUT_DIR]
#   tools/profile-jit.sh attn_decode_gqa_d128_kv4096 /tmp/prof
#
# OUT_DIR (default: a new temporary directory) keeps <start>.asm for each hot
# mapping: objdump's listing with the sample count of each instruction in the
# first column. The limit kernels that vkattn-bench interleaves with the case
# show up as mappings of their own (small ones: the streaming-read and FMA
# loops); the case's kernel is usually the largest mapping.
#
# Needs perf (linux-perf), gdb, objdump (binutils) and python3, and a kernel
# that lets this user sample its own processes (perf_event_paranoid <= 2).
# Environment: VKATTN_BENCH (default <repo>/build/bench/vkattn-bench),
# PROFILE_WAIT (seconds before sampling: pipeline compilation; default 8),
# PROFILE_SECONDS (sampling time, default 4).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bench=${VKATTN_BENCH:-$root/build/bench/vkattn-bench}
case_name=${1:?usage: tools/profile-jit.sh CASE [OUT_DIR]}
out=${2:-$(mktemp -d /tmp/vkattn-profile.XXXXXX)}
for tool in perf gdb objdump python3; do
  if ! command -v $tool >/dev/null; then
    echo "profile-jit: $tool is not installed (apt-get install linux-perf gdb binutils python3)" >&2
    exit 2
  fi
done
if [[ ! -x $bench ]]; then
  echo "profile-jit: no benchmark program at $bench (build it, or set VKATTN_BENCH)" >&2
  exit 2
fi
if ! "$bench" --list | grep -qx "$case_name"; then
  echo "profile-jit: no case \"$case_name\" (vkattn-bench --list names them)" >&2
  exit 2
fi
mkdir -p "$out"

# Enough repetitions to outlast the sampling; stopped once the code is copied.
"$bench" --case "$case_name" --reps 1000 >"$out/bench.json" 2>"$out/bench.err" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
sleep "${PROFILE_WAIT:-8}"
if ! kill -0 $pid 2>/dev/null; then
  echo "profile-jit: the benchmark ended before sampling began:" >&2
  cat "$out/bench.err" >&2
  exit 1
fi
if ! perf record -q -o "$out/perf.data" -p $pid -- sleep "${PROFILE_SECONDS:-4}" >"$out/perf.log" 2>&1; then
  echo "profile-jit: perf record failed (kernel.perf_event_paranoid = $(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null)):" >&2
  cat "$out/perf.log" >&2
  exit 1
fi
perf script -i "$out/perf.data" -F ip 2>/dev/null | sort | uniq -c | sort -rn >"$out/samples.txt"
cp /proc/$pid/maps "$out/maps.txt"

# Anonymous executable mappings holding at least 2% of the samples.
python3 - "$out" >"$out/hot.txt" <<'PY'
import sys
out = sys.argv[1]
maps = []
for line in open(f"{out}/maps.txt"):
    f = line.split()
    lo, hi = (int(x, 16) for x in f[0].split("-"))
    if "x" in f[1] and len(f) < 6:  # executable, no file behind it: JIT code
        maps.append((lo, hi))
count, total = {}, 0
for line in open(f"{out}/samples.txt"):
    n, ip = line.split()
    n, ip = int(n), int(ip, 16)
    total += n
    for lo, hi in maps:
        if lo <= ip < hi:
            count[(lo, hi)] = count.get((lo, hi), 0) + n
for (lo, hi), n in sorted(count.items(), key=lambda kv: -kv[1]):
    if n >= 0.02 * total:
        print(f"{lo:x} {hi:x} {n} {n / total:.3f}")
PY
while read -r lo hi _; do
  gdb -p $pid -batch -ex "dump binary memory $out/$lo.bin 0x$lo 0x$hi" >/dev/null 2>&1 || true
done <"$out/hot.txt"
kill $pid 2>/dev/null || true
wait $pid 2>/dev/null || true
trap - EXIT

python3 - "$out" <<'PY'
import collections, subprocess, sys
out = sys.argv[1]
samples = {}
for line in open(f"{out}/samples.txt"):
    n, ip = line.split()
    samples[int(ip, 16)] = int(n)
FP = ("vmulps", "vaddps", "vsubps", "vfmadd", "vfmsub", "vfnmadd")
print("share  samples  instructions  fp_mul_add  f16_cvt  spill_st  spill_ld  calls  mapping")
for line in open(f"{out}/hot.txt"):
    lo, hi, n, share = line.split()
    try:
        listing = subprocess.run(["objdump", "-D", "-b", "binary", "-m", "i386:x86-64",
                                  f"--adjust-vma=0x{lo}", f"{out}/{lo}.bin"],
                                 capture_output=True, text=True, check=True).stdout
    except (subprocess.CalledProcessError, FileNotFoundError):
        print(f"{float(share):5.3f}  {n:>7}  (could not copy the mapping)  {lo}")
        continue
    mix, annotated = collections.Counter(), []
    for text in listing.splitlines():
        parts = text.split("\t")
        addr = parts[0].strip().rstrip(":")
        ins = parts[2].strip() if len(parts) > 2 else ""
        try:
            at = int(addr, 16)
        except ValueError:
            annotated.append(text)
            continue
        annotated.append(f"{samples.get(at, ''):>6} {text}")
        if not ins or ins.startswith("(bad)") or ins.startswith("add    %al,(%rax)"):
            continue  # padding and data between functions
        op = ins.split()[0]
        mix["all"] += 1
        mix["fp"] += op.startswith(FP)
        mix["cvt"] += op == "vcvtph2ps"
        mix["st"] += op.startswith("vmov") and ins.endswith("(%rsp)")
        mix["ld"] += op.startswith("vmov") and "(%rsp)" in ins and not ins.endswith("(%rsp)")
        mix["call"] += op == "call"
    with open(f"{out}/{lo}.asm", "w") as f:
        f.write("\n".join(annotated) + "\n")
    print(f"{float(share):5.3f}  {n:>7}  {mix['all']:>12}  {mix['fp']:>10}  {mix['cvt']:>7}  "
          f"{mix['st']:>8}  {mix['ld']:>8}  {mix['call']:>5}  {lo}")
print(f"(listings with per-instruction samples: {out}/<mapping>.asm)")
PY
