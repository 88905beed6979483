#!/usr/bin/env bash
# vkattn-bench on two or more Vulkan drivers, alternating: round 1 runs every
# driver once, round 2 again, and so on, so that each driver sees the same
# drifting machine. Prints a markdown table: per case, each driver's median
# over the rounds of vkattn-bench's per-run medians, and each later driver's
# ratio to the first. Made for comparing Mesa versions (tools/lavapipe25.sh)
# on one machine; any ICD jsons work.
#
#   tools/bench-drivers.sh [--rounds N] [--out DIR] ICD.json ICD.json [...] -- [vkattn-bench args]
#   tools/bench-drivers.sh /usr/share/vulkan/icd.d/lvp_icd.x86_64.json \
#       build/lavapipe25/lvp_icd.json -- --case gemm_m1024_n6144_k4096 --reps 7
#
# --rounds N   alternations (default 3)
# --out DIR    keeps each run's JSON lines as DIR/<round>-<driver index>.jsonl
# Environment: VKATTN_BENCH (default <repo>/build/bench/vkattn-bench).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bench=${VKATTN_BENCH:-$root/build/bench/vkattn-bench}
rounds=3
out=""
icds=()
while (($#)); do
  case $1 in
    --rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *)
      [[ -f $1 ]] || { echo "bench-drivers: no ICD json at '$1'" >&2; exit 2; }
      icds+=("$1"); shift ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "bench-drivers: --rounds must be a positive integer (got '$rounds')" >&2; exit 2; }
((${#icds[@]} >= 2)) || { echo "bench-drivers: name at least two ICD json files" >&2; exit 2; }
[[ -x $bench ]] || { echo "bench-drivers: no benchmark program at $bench (VKATTN_BENCH)" >&2; exit 2; }
[[ -n $out ]] || out=$(mktemp -d "${TMPDIR:-/tmp}/bench-drivers.XXXXXX")
mkdir -p "$out"
for ((r = 1; r <= rounds; r++)); do
  for i in "${!icds[@]}"; do
    echo "bench-drivers: round $r/$rounds, driver $i (${icds[i]})" >&2
    VK_ICD_FILENAMES=${icds[i]} VK_DRIVER_FILES=${icds[i]} "$bench" --quiet "$@" > "$out/$r-$i.jsonl"
  done
done
python3 - "$out" "$rounds" "${#icds[@]}" <<'PY'
import json, statistics, sys
out, rounds, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ms, driver, order = {}, {}, []
for r in range(1, rounds + 1):
    for i in range(n):
        for line in open(f"{out}/{r}-{i}.jsonl"):
            if not line.startswith("{"):
                continue
            j = json.loads(line)
            if j.get("case") == "peak":
                continue
            driver[i] = j.get("driver", "?")
            if j["case"] not in order:
                order.append(j["case"])
            ms.setdefault((j["case"], i), []).append(j["ms"])
head = ["case"] + [f"{driver.get(i, '?')} ms" for i in range(n)]
head += [f"{i} / 0" for i in range(1, n)]
print("| " + " | ".join(head) + " |")
print("|---|" + "---:|" * (len(head) - 1))
for c in order:
    med = [statistics.median(ms[(c, i)]) if (c, i) in ms else None for i in range(n)]
    cells = [f"{m:.2f}" if m is not None else "-" for m in med]
    cells += [f"{med[i] / med[0]:.2f}" if med[i] and med[0] else "-" for i in range(1, n)]
    print(f"| {c} | " + " | ".join(cells) + " |")
print()
print(f"Medians over {rounds} alternating rounds of each run's median; driver 0 is the baseline. "
      f"JSON lines: {out}")
PY
