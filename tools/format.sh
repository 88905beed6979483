#!/usr/bin/env bash
# The C sources against .clang-format (clang-format 14, Debian 12):
#   tools/format.sh            reformat every tracked .c and .h in place
#   tools/format.sh --check    change nothing; list the files that differ and
#                              exit 1 if any does (tools/test.sh runs this)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
mapfile -t files < <(git ls-files '*.c' '*.h')
if [[ "${1:-}" == "--check" ]]; then
  bad=()
  for f in "${files[@]}"; do
    clang-format --style=file "$f" | cmp -s - "$f" || bad+=("$f")
  done
  if ((${#bad[@]})); then
    echo "clang-format: ${#bad[@]} file(s) differ from .clang-format (run tools/format.sh):"
    printf '  %s\n' "${bad[@]}"
    exit 1
  fi
  echo "clang-format: ${#files[@]} files formatted"
  exit 0
fi
clang-format --style=file -i "${files[@]}"
