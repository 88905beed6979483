#!/usr/bin/env bash
# One fuzz test (ctest -L fuzz): a fixed number of runs from a fixed seed,
# starting from the committed corpus, which libFuzzer only reads (it writes
# new inputs to the first directory it is given: here an empty scratch one).
#   run_corpus.sh <fuzz executable> <committed corpus dir> <scratch dir> <runs>
set -euo pipefail
exe=$1 corpus=$2 scratch=$3 runs=$4
rm -rf "$scratch"
mkdir -p "$scratch"
cd "$scratch/.."
exec "$exe" -runs="$runs" -seed=1 -timeout=20 -print_final_stats=1 "$scratch" "$corpus"
