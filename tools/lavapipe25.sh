#!/usr/bin/env bash
# A newer lavapipe beside the system's, for the test suite's third
# implementation (ctest -L lavapipe25) and for comparing drivers with
# vkattn-bench: downloads Debian's mesa-vulkan-drivers from <codename>-backports
# (Mesa 25 for bookworm) with `apt-get download`, unpacks it into DIR and writes
# DIR/lvp_icd.json naming the unpacked driver by absolute path. Nothing is
# installed system-wide and the system's apt state is not touched: apt runs
# on a private sources list and private list/cache folders inside DIR. The
# archive is the one the system's own apt sources use for its release.
#
#   tools/lavapipe25.sh DIR       e.g. tools/lavapipe25.sh build/lavapipe25
#
# Then: VK_ICD_FILENAMES=DIR/lvp_icd.json <any vkattn program>.
# Already there: does nothing. Exits 1 with the reason on stderr when the
# driver cannot be had (no network, no backports for this release, a library
# it needs missing); tools/test.sh then runs without it and says so.
set -euo pipefail
dir=${1:?usage: tools/lavapipe25.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
icd=$dir/lvp_icd.json
lib=$dir/root/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so
if [[ -f $icd && -f $lib ]]; then
  exit 0
fi

fail() {
  echo "lavapipe25: $*" >&2
  exit 1
}
[[ $(uname -m) == x86_64 ]] || fail "only x86_64 is set up (this is $(uname -m))"
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[[ -n $codename ]] || fail "no VERSION_CODENAME in /etc/os-release"

# The Debian archive (URI and keyring) that the system's sources use for
# $codename itself; apt on a private state inside $dir.
# shellcheck source=debian-archive.sh source-path=SCRIPTDIR
. "$(dirname "${BASH_SOURCE[0]}")/debian-archive.sh"
debian_archive "$codename" || fail "no apt source for '$codename' found in /etc/apt"

apt_dir=$dir/apt
rm -rf "$dir/root" "$dir"/*.deb
private_apt "$apt_dir"
debian_deb_line "$codename-backports" > "$apt_dir/sources.list"
echo "lavapipe25: fetching mesa-vulkan-drivers from $codename-backports"
apt-get "${apt_opts[@]}" -q update > "$apt_dir/update.log" 2>&1 ||
  fail "apt-get update of $codename-backports failed (log: $apt_dir/update.log)"
(cd "$dir" && apt-get "${apt_opts[@]}" -q download "mesa-vulkan-drivers/$codename-backports" \
  > "$apt_dir/download.log" 2>&1) ||
  fail "apt-get download failed (log: $apt_dir/download.log)"
deb=$(ls "$dir"/mesa-vulkan-drivers_*.deb 2>/dev/null | head -n 1)
[[ -n $deb ]] || fail "no package was downloaded (log: $apt_dir/download.log)"
dpkg-deb -x "$deb" "$dir/root"
[[ -f $lib ]] || fail "$deb has no libvulkan_lvp.so"
missing=$(ldd "$lib" | grep 'not found' || true)
[[ -z $missing ]] || fail "the driver needs libraries this system lacks: $missing"
version=$(dpkg-deb -f "$deb" Version)
python3 - "$lib" "$dir/root/usr/share/vulkan/icd.d/lvp_icd.json" "$icd" <<'EOF'
import json, sys
lib, src, dst = sys.argv[1:]
j = json.load(open(src))
j["ICD"]["library_path"] = lib
open(dst + ".tmp", "w").write(json.dumps(j, indent=4) + "\n")
EOF
mv "$icd.tmp" "$icd"
rm -f "$deb"
echo "lavapipe25: mesa-vulkan-drivers $version in $dir (ICD: $icd)"
