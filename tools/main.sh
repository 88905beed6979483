#!/usr/bin/env bash
# The main job: set up and build, list the Vulkan devices, then run a small
# smoke dispatch on the default device with the validation layer on.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/tools/build.sh" build
"$root/build/tools/vkattn" info
echo
"$root/build/tools/vkattn" smoke --validate
