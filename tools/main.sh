#!/usr/bin/env bash
# The main job: set up and build, list the Vulkan devices, then run real
# attention layers (GPT-2-small-shaped MHA and Llama-3-8B-shaped GQA, f32 and
# f16) on the default device with the validation layer on, each checked
# against the CPU reference: shape, GPU time and max error are printed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/tools/build.sh" build
"$root/build/tools/vkattn" info
echo
"$root/build/tools/vkattn" demo --validate
