#!/usr/bin/env bash
# One prepared check for a GPU test machine (an H200), as one call of at most 480 s wall time, so a
# second run still fits in 15 device-minutes. GPU-only stages in order of value (scripts/
# device_check.py says what each measures); each has its own time limit and writes its result in
# OUTDIR as it ends, so a run cut short keeps what finished:
#
#   stage     limit   file                 stage     limit   file
#   facts      20 s   facts.json           peers      60 s   peers.json
#   smoke      60 s   smoke.json           ladder     70 s   ladder.json
#   run       130 s   run.json             families   60 s   families.json
#   summary    15 s   summary.txt          (+ device_check.log: everything printed)
#   sum of limits with nvidia-smi (10 s), installing rooflab (40 s, only when it is not importable:
#   `pip install --no-deps --no-build-isolation --no-index -e .`, the image has every dependency)
#   and 2 s to kill each stage: 477 s; at most 8 files, flat.
#
# No compile on the device where it can be helped: kernels come from ROOFLAB_CACHE_DIR, by default
# build/device-cubins when present (scripts/build_cubins.sh fills it here, with this machine's NVRTC,
# for sm_90/sm_90a; carry it with the tree). A kernel whose cubin is missing, built by another NVRTC
# major version, or refused by the driver is compiled there as usual.
#
#   usage: scripts/device_check.sh [--rehearse] OUTDIR
#   --rehearse: the same stages on the CPU stand-in for cupy (tests/fake_gpu.py), tiny sizes (CI).
# Exit status: 0 when every stage ended with 0; 1 when a stage failed (named in the summary table);
# 2 on bad input or when there is no usable GPU (one line says why).
set -uo pipefail
rehearse=""
if [ "${1:-}" = "--rehearse" ]; then rehearse="--rehearse"; shift; fi
out=${1:?usage: scripts/device_check.sh [--rehearse] OUTDIR}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out" || { echo "device_check: error: cannot create $out" >&2; exit 2; }
log="$out/device_check.log"
exec > >(tee "$log") 2>&1
tee_pid=$!
export PYTHONUNBUFFERED=1 PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
if [ -z "${ROOFLAB_CACHE_DIR:-}" ] && [ -d "$here/build/device-cubins" ]; then
  export ROOFLAB_CACHE_DIR="$here/build/device-cubins"
fi
py=${PYTHON:-python3}
start=$(date +%s)
echo "== $(date -u +%FT%TZ) rooflab device check on $(hostname) ${rehearse:+(rehearsal on the CPU stand-in)}"
echo "== kernels from ${ROOFLAB_CACHE_DIR:-the default cache} ($(ls "${ROOFLAB_CACHE_DIR:-/nonexistent}/cuda" 2>/dev/null | grep -c cubin) cubins)"
if ! "$py" -c "import rooflab.kernels.cuda" 2>/dev/null; then  # kernels/ is packaged as rooflab.kernels
  echo "== install rooflab (no dependencies, no network)"
  timeout 40 "$py" -m pip install -q --no-deps --no-build-isolation --no-index -e "$here" ||
    { echo "device_check: error: rooflab could not be installed from $here"; exec 1>&- 2>&-; wait "$tee_pid"; exit 2; }
fi
[ -z "$rehearse" ] && { timeout 10 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,memory.total --format=csv || true; }

rcs=""
failed=0
stage() {  # stage NAME LIMIT_S
  local name=$1 limit=$2 t0 rc
  t0=$(date +%s)
  echo "== $name (limit ${limit} s)"
  timeout --kill-after=2 "$limit" "$py" "$here/scripts/device_check.py" "$name" "$out" $rehearse
  rc=$?
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "== $name: cut at its ${limit} s limit"
  echo "== $name: exit $rc after $(( $(date +%s) - t0 )) s"
  rcs="$rcs $name=$rc"
  if [ $rc -ne 0 ]; then failed=1; fi
  return $rc
}

stage facts 20
if [ $? -eq 2 ]; then  # no usable GPU: nothing else can run
  echo "== no GPU run (see the line above)"
  exec 1>&- 2>&-
  wait "$tee_pid" 2>/dev/null
  exit 2
fi
stage smoke 60
stage run 130
stage peers 60
stage ladder 70
stage families 60
echo "== summary after $(( $(date +%s) - start )) s"
ROOFLAB_CHECK_RCS="$rcs" timeout 15 "$py" "$here/scripts/device_check.py" summary "$out" $rehearse
echo "== done in $(( $(date +%s) - start )) s:$rcs"
exec 1>&- 2>&-  # close the pipe so that tee has written the whole log before we exit
wait "$tee_pid" 2>/dev/null
exit $failed
