#!/usr/bin/env bash
# Installs what is missing (tools/install-deps.sh), configures and builds.
#   tools/build.sh [build-dir [extra cmake args...]]     default build dir: build
# Compiler output goes to <build-dir>.log and is printed only on failure.
# The cooperative-matrix kernels need a glslang that compiles
# GL_KHR_cooperative_matrix (15 or newer; Debian 12 has 12): where the one on
# PATH cannot, this brings Debian 13's glslang and SPIRV-Tools with
# tools/lavapipe26.sh (unpacked into build/lavapipe26, nothing system-wide)
# and passes them as VKATTN_GLSLANG / VKATTN_SPIRV_VAL / VKATTN_SPIRV_OPT; if
# that fails (no network) the library builds without them and says so. Not
# for builds that name VKATTN_GLSLANG themselves or reuse another build's
# shaders (VKATTN_SHADERS_FROM), nor with VKATTN_NO_LAVAPIPE26=1.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${1:-build}
shift || true
bash "$root/tools/install-deps.sh"

# Whether the glslangValidator on PATH compiles a cooperative-matrix shader.
system_glslang_has_coopmat() {
  local tmp rc=0
  tmp=$(mktemp -d)
  printf '%s\n' '#version 450' '#extension GL_KHR_cooperative_matrix : require' \
    'layout(local_size_x = 32) in;' \
    'void main() { coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c; }' \
    > "$tmp/t.comp"
  glslangValidator --quiet --target-env vulkan1.3 -o "$tmp/t.spv" "$tmp/t.comp" > /dev/null 2>&1 ||
    rc=1
  rm -rf "$tmp"
  return $rc
}
tools=()
if [[ " $* " != *" -DVKATTN_GLSLANG="* && " $* " != *" -DVKATTN_SHADERS_FROM="* &&
      ${VKATTN_NO_LAVAPIPE26:-} != 1 ]] && ! system_glslang_has_coopmat; then
  if bash "$root/tools/lavapipe26.sh" "$root/build/lavapipe26"; then
    bin=$root/build/lavapipe26/bin
    tools=(-DVKATTN_GLSLANG="$bin/glslangValidator" -DVKATTN_SPIRV_VAL="$bin/spirv-val"
      -DVKATTN_SPIRV_OPT="$bin/spirv-opt")
  else
    echo "build: no Debian 13 glslang: the coopmat kernels are not built (see above)" >&2
  fi
fi

log="$root/$dir.log"
if ! { cmake -S "$root" -B "$root/$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${tools[@]}" "$@" &&
       cmake --build "$root/$dir" -j "$(nproc)"; } > "$log" 2>&1; then
  cat "$log"
  echo "build of $dir failed (log: $log)" >&2
  exit 1
fi
grep -h "vkattn: coopmat kernels" "$log" || true
echo "built $dir/ (log: $dir.log)"
