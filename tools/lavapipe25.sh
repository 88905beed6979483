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
# $codename itself, from deb822 .sources files or one-line sources.list entries.
source_line=$(python3 - "$codename" <<'EOF'
import glob, re, sys
codename = sys.argv[1]
def emit(uri, key):
    opts = f" [signed-by={key}]" if key else ""
    print(f"deb{opts} {uri} {codename}-backports main")
    sys.exit(0)
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for para in open(path).read().split("\n\n"):
        fields = {}
        for line in para.splitlines():
            if ":" in line and not line.startswith(("#", " ")):
                k, v = line.split(":", 1)
                fields[k.strip().lower()] = v.strip()
        if "deb" in fields.get("types", "").split() and \
                codename in fields.get("suites", "").split() and "uris" in fields:
            emit(fields["uris"].split()[0], fields.get("signed-by"))
for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        m = re.match(r"\s*deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)", line)
        if m and m.group(3) == codename:
            keys = re.findall(r"signed-by=(\S+)", m.group(1) or "")
            emit(m.group(2), keys[0] if keys else None)
sys.exit(1)
EOF
) || fail "no apt source for '$codename' found in /etc/apt"

apt_dir=$dir/apt
rm -rf "$apt_dir" "$dir/root" "$dir"/*.deb
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
echo "$source_line" > "$apt_dir/sources.list"
apt_opts=(
  -o "Dir::Etc::SourceList=$apt_dir/sources.list" -o "Dir::Etc::SourceParts=-"
  -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
  -o "APT::Get::List-Cleanup=0" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root"
)
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
