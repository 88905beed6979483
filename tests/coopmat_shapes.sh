#!/usr/bin/env bash
# test_coopmat_shapes: every coopmat-family module specialized for the matrix
# shapes of GPUs this machine cannot run - 16x16x16 (NVIDIA, AMD RDNA3,
# Intel Arc), 16x8x16 (NVIDIA), 8x16x16 (Intel Xe2, subgroup 16) - and for
# lavapipe's 8x8x8: spirv-opt sets the shape constants (ids 16, 17, 18) and
# freezes them, spirv-val validates the result for Vulkan 1.3.
#   coopmat_shapes.sh SPIRV_OPT SPIRV_VAL SPIRV_DIR NAME...
set -euo pipefail
opt=$1 val=$2 dir=$3
shift 3
(($# > 0)) || { echo "coopmat_shapes: no modules named" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
checked=0
for name in "$@"; do
  for shape in "16 16 16" "16 8 16" "8 16 16" "8 8 8"; do
    read -r m n k <<< "$shape"
    "$opt" --set-spec-const-default-value "16:$m 17:$n 18:$k" "$dir/$name.spv" -o "$tmp/set.spv"
    "$opt" --freeze-spec-const "$tmp/set.spv" -o "$tmp/frozen.spv"
    if ! "$val" --target-env vulkan1.3 "$tmp/frozen.spv"; then
      echo "FAILED: $name at ${m}x${n}x${k}" >&2
      exit 1
    fi
    checked=$((checked + 1))
  done
done
echo "coopmat_shapes: $# modules x 4 shapes = $checked specialized modules valid for Vulkan 1.3"
