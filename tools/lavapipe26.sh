#!/usr/bin/env bash
# Mesa 26.1's lavapipe, and glslang 15 / SPIRV-Tools, on an older Debian (made
# for bookworm): they need Debian 13's C library and friends, so this downloads
# trixie-backports' mesa-vulkan-drivers, trixie's glslang-tools and spirv-tools
# and every trixie package they depend on (libc6, libllvm19, libvulkan1, ...:
# apt works out the list) with `apt-get download`, unpacks them all into
# DIR/root and writes
#   DIR/lvp_icd.json  the unpacked driver's ICD json, library_path absolute;
#   DIR/bin/glslangValidator, DIR/bin/spirv-val, DIR/bin/spirv-opt
#                     trixie's tools as plain commands (through DIR/run), for
#                     CMake's VKATTN_GLSLANG / VKATTN_SPIRV_VAL / VKATTN_SPIRV_OPT
#                     (tools/build.sh; the coopmat kernels, cmake/coopmat.cmake);
#   DIR/run           `DIR/run PROGRAM [ARGS...]`: runs PROGRAM through trixie's
#                     dynamic loader (DIR/root/usr/lib/x86_64-linux-gnu/
#                     ld-linux-x86-64.so.2) with trixie's library folders first
#                     and then the system's (so that libraries trixie's set lacks
#                     still resolve), and VK_ICD_FILENAMES and VK_DRIVER_FILES set
#                     to DIR/lvp_icd.json unless either is already set.
# Nothing is installed system-wide and the system's apt state is not touched:
# apt runs on a private sources list, list/cache folders and an empty dpkg
# status inside DIR. The archive is the one the system's own apt sources use
# for its release (tools/debian-archive.sh), with trixie's suites; its Release
# files are checked against the same keyring (bookworm's debian-archive-keyring
# holds trixie's keys).
#
#   tools/lavapipe26.sh DIR       e.g. tools/lavapipe26.sh build/lavapipe26
#
# Then, e.g.:
#   DIR/run build/tools/vkattn info
#   DIR/run DIR/root/usr/bin/glslangValidator --version
#   DIR/run DIR/root/usr/bin/spirv-val --version
# PROGRAM must be an ELF executable (a name without a slash is looked up in
# PATH): the loader cannot start a script. For a script, name its interpreter:
# `DIR/run /usr/bin/python3 script.py`, `DIR/run /bin/bash script.sh`. Only that
# process runs on trixie's libraries: programs it starts use the system's
# loader and libraries again (wrap them with DIR/run too), and its
# /proc/self/exe is the loader, not PROGRAM.
# Already there: does nothing. Exits 1 with the reason on stderr when the
# packages cannot be had (no network, an archive without trixie) or a library
# they need is missing from the unpacked set.
set -euo pipefail
dir=${1:?usage: tools/lavapipe26.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
root=$dir/root
icd=$dir/lvp_icd.json
lib=$root/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so
ldso=$root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
tools=("$root/usr/bin/glslangValidator" "$root/usr/bin/spirv-val" "$root/usr/bin/spirv-opt")
layers=$root/usr/share/vulkan/explicit_layer.d
# DIR/bin: the tools as commands of their own (CMake runs them directly).
write_bin() {
  mkdir -p "$dir/bin"
  local t name
  for t in "${tools[@]}"; do
    name=$(basename "$t")
    printf '#!/bin/sh\n# Written by tools/lavapipe26.sh: trixie'"'"'s %s through DIR/run.\nexec %q %q "$@"\n' \
      "$name" "$dir/run" "$t" > "$dir/bin/$name.tmp"
    chmod +x "$dir/bin/$name.tmp"
    mv "$dir/bin/$name.tmp" "$dir/bin/$name"
  done
}
if [[ -f $icd && -f $lib && -x $dir/run && -x ${tools[0]} && -x ${tools[1]} && -x ${tools[2]} &&
      -f $layers/VkLayer_khronos_validation.json ]] && grep -q VK_LAYER_PATH "$dir/run"; then
  [[ -x $dir/bin/spirv-opt ]] || write_bin
  exit 0
fi

fail() {
  echo "lavapipe26: $*" >&2
  exit 1
}
[[ $(uname -m) == x86_64 ]] || fail "only x86_64 is set up (this is $(uname -m))"
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[[ -n $codename ]] || fail "no VERSION_CODENAME in /etc/os-release"

# The Debian archive (URI and keyring) that the system's sources use for
# $codename, with trixie's suites; apt on a private state inside $dir.
# shellcheck source=debian-archive.sh source-path=SCRIPTDIR
. "$(dirname "${BASH_SOURCE[0]}")/debian-archive.sh"
debian_archive "$codename" || fail "no apt source for '$codename' found in /etc/apt"

apt_dir=$dir/apt
debs=$dir/debs
rm -rf "$root" "$debs" "$icd" "$dir/run"
private_apt "$apt_dir"
{ debian_deb_line trixie; debian_deb_line trixie-backports; } > "$apt_dir/sources.list"
echo "lavapipe26: fetching mesa-vulkan-drivers from trixie-backports, glslang and their libraries from trixie"
apt-get "${apt_opts[@]}" -q update > "$apt_dir/update.log" 2>&1 ||
  fail "apt-get update of trixie and trixie-backports failed (log: $apt_dir/update.log)"
# (an unreachable archive is only a warning to apt-get update)
! grep -q '^[WE]: Failed to fetch' "$apt_dir/update.log" ||
  fail "cannot reach $debian_uri for trixie and trixie-backports (log: $apt_dir/update.log)"

# Everything the three packages depend on, as apt would install it on an empty
# system: "Inst NAME (VERSION ...)" lines of a simulated install.
wanted=(mesa-vulkan-drivers/trixie-backports glslang-tools/trixie spirv-tools/trixie
  vulkan-validationlayers/trixie)
apt-get "${apt_opts[@]}" -q -s --no-install-recommends install "${wanted[@]}" \
  > "$apt_dir/resolve.log" 2>&1 ||
  fail "apt cannot resolve ${wanted[*]} (log: $apt_dir/resolve.log)"
mapfile -t pkgs < <(awk '$1 == "Inst" { print $2 "=" substr($3, 2) }' "$apt_dir/resolve.log")
((${#pkgs[@]} > 0)) || fail "apt chose no packages (log: $apt_dir/resolve.log)"

mkdir -p "$debs"
(cd "$debs" && apt-get "${apt_opts[@]}" -q download "${pkgs[@]}" > "$apt_dir/download.log" 2>&1) ||
  fail "apt-get download failed (log: $apt_dir/download.log)"
for deb in "$debs"/*.deb; do
  dpkg-deb -x "$deb" "$root"
done
mesa_deb=$(ls "$debs"/mesa-vulkan-drivers_*.deb)
version=$(dpkg-deb -f "$mesa_deb" Version)
[[ -f $lib ]] || fail "$mesa_deb has no libvulkan_lvp.so"
[[ -x $ldso ]] || fail "no dynamic loader at $ldso"

# Trixie's library folders (its packages are merged into /usr, but list /lib
# too should one not be).
trixie_libs=$root/usr/lib/x86_64-linux-gnu
[[ ! -d $root/lib/x86_64-linux-gnu ]] || trixie_libs+=:$root/lib/x86_64-linux-gnu

# The driver and the tools must find every library in trixie's set alone: the
# loader would otherwise quietly take the system's (older) copies.
layer_lib=$root/usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so
for elf in "$lib" "$layer_lib" "${tools[@]}"; do
  [[ -x $elf || $elf == "$lib" || $elf == "$layer_lib" ]] || fail "no $elf in the unpacked packages"
  [[ -f $elf ]] || fail "no $elf in the unpacked packages"
  needs=$("$ldso" --library-path "$trixie_libs" --list "$elf" 2>&1) ||
    fail "trixie's loader cannot list $elf: $needs"
  outside=$(grep -F '=>' <<< "$needs" | grep -vF "=> $root/" || true)
  [[ -z $outside ]] || fail "$elf needs libraries not in the unpacked set:"$'\n'"$outside"
done

python3 - "$lib" "$root/usr/share/vulkan/icd.d/lvp_icd.json" "$icd" <<'EOF'
import json, sys
lib, src, dst = sys.argv[1:]
j = json.load(open(src))
j["ICD"]["library_path"] = lib
open(dst + ".tmp", "w").write(json.dumps(j, indent=4) + "\n")
EOF
mv "$icd.tmp" "$icd"

# DIR/run: the paths above, then a fixed body.
{
  echo '#!/usr/bin/env bash'
  echo "# Written by tools/lavapipe26.sh (mesa-vulkan-drivers $version from trixie-backports)."
  cat <<'EOF'
#   DIR/run PROGRAM [ARGS...]
# Runs PROGRAM, an ELF executable (for a script, name its interpreter), through
# Debian trixie's dynamic loader with trixie's libraries first, then
# LD_LIBRARY_PATH's, then the system's; the Vulkan driver is DIR/lvp_icd.json
# unless VK_ICD_FILENAMES or VK_DRIVER_FILES is set. Programs that PROGRAM
# starts run on the system's loader and libraries again. Vulkan layers come
# from trixie's vulkan-validationlayers (VK_LAYER_PATH) unless it is set.
EOF
  printf 'icd=%q\nldso=%q\ntrixie_libs=%q\nlayers=%q\n' "$icd" "$ldso" "$trixie_libs" "$layers"
  cat <<'EOF'
system_libs=/usr/local/lib/x86_64-linux-gnu:/usr/local/lib:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:/lib:/usr/lib
set -euo pipefail
if [[ -z ${VK_ICD_FILENAMES:-}${VK_DRIVER_FILES:-} ]]; then
  export VK_ICD_FILENAMES="$icd" VK_DRIVER_FILES="$icd"
fi
# trixie's validation layer (it knows VK_KHR_cooperative_matrix; bookworm's does not)
if [[ -z ${VK_LAYER_PATH:-} ]]; then
  export VK_LAYER_PATH="$layers"
fi
(($# > 0)) || { echo "usage: $0 PROGRAM [ARGS...]" >&2; exit 2; }
prog=$1
shift
if [[ $prog != */* ]]; then
  path=$(type -P -- "$prog") || { echo "$0: $prog: not found in PATH" >&2; exit 127; }
  prog=$path
fi
magic=
if [[ -r $prog ]]; then
  IFS= read -r -N 4 magic < "$prog" || true
fi
if [[ $magic != $'\x7fELF' ]]; then
  echo "$0: $prog is not an ELF executable; for a script name its interpreter" \
    "(e.g. $0 /usr/bin/python3 SCRIPT)" >&2
  exit 126
fi
exec "$ldso" --library-path "$trixie_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:$system_libs" \
  "$prog" "$@"
EOF
} > "$dir/run.tmp"
chmod +x "$dir/run.tmp"
mv "$dir/run.tmp" "$dir/run"
write_bin
rm -rf "$debs"
echo "lavapipe26: mesa-vulkan-drivers $version, glslang and spirv-tools in $root (ICD: $icd; run: $dir/run PROGRAM)"
