# shellcheck shell=bash
# Sourced by tools/lavapipe25.sh and tools/lavapipe26.sh (not run on its own):
# the Debian archive this system's apt uses, and apt on a private state.
#
#   debian_archive CODENAME    sets debian_uri and debian_keyring (empty when
#                              the entry has no signed-by) from the first apt
#                              source (deb822 .sources files, then one-line
#                              sources.list entries) whose suites include
#                              CODENAME; returns 1 when there is none
#   debian_deb_line SUITE      prints a one-line sources.list entry for SUITE's
#                              main component of that archive
#   private_apt DIR            empties DIR and sets up apt's folders in it; sets
#                              the array apt_opts for apt-get/apt-cache to use
#                              DIR/sources.list and DIR's lists and cache only,
#                              with an empty dpkg status (the system's installed
#                              packages play no part, its apt state is not touched)

debian_archive() {
  local found
  found=$(python3 - "$1" <<'EOF'
import glob, re, sys
codename = sys.argv[1]
def emit(uri, key):
    print(uri, key or "")
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
  ) || return 1
  read -r debian_uri debian_keyring <<< "$found"
}

debian_deb_line() {
  local opts=
  [[ -z $debian_keyring ]] || opts=" [signed-by=$debian_keyring]"
  echo "deb$opts $debian_uri $1 main"
}

private_apt() {
  rm -rf "$1"
  mkdir -p "$1/lists/partial" "$1/cache/archives/partial"
  # shellcheck disable=SC2034 # for the caller
  apt_opts=(
    -o "Dir::Etc::SourceList=$1/sources.list" -o "Dir::Etc::SourceParts=-"
    -o "Dir::State::Lists=$1/lists" -o "Dir::Cache=$1/cache"
    -o "Dir::State::status=/dev/null"
    -o "APT::Get::List-Cleanup=0" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root"
  )
}
