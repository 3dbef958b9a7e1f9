#!/usr/bin/env bash
# Compile every kernel the device check launches, here (NVRTC, no GPU needed), for sm_90 and sm_90a
# (an H100/H200), into build/device-cubins: the device check's rehearsal on the CPU stand-in builds
# exactly the kernels, knobs and name expressions the real run asks for, with the real NVRTC.
# Carry build/device-cubins with the tree (it is git-ignored); on the device the loader takes a
# cubin from there when its source, options, arch and NVRTC version match, and compiles otherwise.
#
#   usage: scripts/build_cubins.sh [FOLDER]      (default build/device-cubins)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$here/build/device-cubins}
mkdir -p "$dest"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ROOFLAB_CACHE_DIR="$dest" bash "$here/scripts/device_check.sh" --rehearse "$tmp/out" >/dev/null || true
n=$(ls "$dest/cuda" | grep -c '\.cubin$' || true)
echo "build_cubins: $n cubins in $dest/cuda ($(du -sh "$dest" | cut -f1))"
[ "$n" -gt 0 ]
