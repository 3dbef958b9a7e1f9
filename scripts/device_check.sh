#!/usr/bin/env bash
# One prepared check for a GPU test machine (an H200 with Python 3.12, cupy, numba, numpy and pytest
# preinstalled, no network). Installs rooflab without dependencies, runs the GPU and compile tests
# (the GEMM ladder's last: a kernel fault poisons the CUDA context), the CUDA family tests and quick
# suites (figures in gpu-families.json), prints the GEMM ladder's GFLOP/s and % of cuBLAS at 4096,
# runs `rooflab run --device cuda --quick`, and leaves the JSON, the roofline and a log in OUTDIR
# (at most 8 files, all at the top of OUTDIR). Budget: under 8 minutes (every step capped).
#
#   usage: scripts/device_check.sh OUTDIR
set -uo pipefail
out=${1:?usage: scripts/device_check.sh OUTDIR}
mkdir -p "$out"
log="$out/device_check.log"
exec > >(tee "$log") 2>&1
tee_pid=$!
export PYTHONUNBUFFERED=1 CUPY_CACHE_DIR="${TMPDIR:-/tmp}/rooflab-cupy-cache"
py=${PYTHON:-python3}
start=$(date +%s)
echo "== $(date -u +%FT%TZ) rooflab device check on $(hostname)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,memory.total --format=csv || true

if [ -z "${ROOFLAB_CHECK_NO_INSTALL:-}" ]; then  # the tests set it: rooflab is installed there already
  echo "== install (no dependencies, no network)"
  $py -m pip install -q --no-deps --no-build-isolation -e . || { echo "install failed"; exit 1; }
fi

echo "== rooflab info"
timeout 60 $py -m rooflab info

echo "== GPU, CUDA host-side and compile tests"
# shellcheck disable=SC2086  # ROOFLAB_CHECK_TESTS is a list of test files
timeout 300 $py -m pytest -q -p no:cacheprovider ${ROOFLAB_CHECK_TESTS:-tests/test_cuda_gpu.py tests/test_cuda_host.py tests/test_cuda_compile.py tests/test_cuda_gemm_gpu.py}
tests_rc=$?

echo "== CUDA family tests (conv, elementwise, chase, launch, transfer) and their quick suites"
ROOFLAB_FAMILY_FIGURES="$out/gpu-families.json" timeout 150 $py -m pytest -q -p no:cacheprovider \
  ${ROOFLAB_CHECK_FAMILY_TESTS:-tests/test_cuda_families_gpu.py}
families_rc=$?

echo "== GEMM ladder: GFLOP/s at 4096 and % of cuBLAS (interleaved, medians)"
timeout 180 $py scripts/gemm_ladder_cuda.py --size 4096 --json "$out/gemm-ladder.json"
ladder_rc=$?

echo "== rooflab run --device cuda --quick"
timeout 240 $py -m rooflab run --device cuda --quick --out "$out/results"
run_rc=$?

res=$(ls -t "$out"/results/*/rooflab-ceilings-cuda-*.json 2>/dev/null | head -n 1)
if [ -n "$res" ]; then
  cp "$res" "$out/gpu-ceilings.json"
  stem="${res%.json}"
  [ -f "$stem.roofline.png" ] && cp "$stem.roofline.png" "$out/gpu-roofline.png"
  [ -f "$stem.bandwidth.png" ] && cp "$stem.bandwidth.png" "$out/gpu-bandwidth.png"
  $py - "$out/gpu-ceilings.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for c in d["ceilings"]:
    extra = ""
    if c.get("fraction_of_theoretical"):
        extra = (f" ({c['fraction_of_theoretical']:.1%} of {c['theoretical']:.0f} at the "
                 f"{c['theoretical_clock']} clock {c['theoretical_clock_ghz']:.3f} GHz)")
    print(f"{c['name']:40s} {c['value']:12.1f} {c['unit']}{extra}")
for b in d.get("cuda_builds", []):
    regs = ", ".join(f"{k}: {r.get('registers')} regs, {r.get('spill_store_bytes')} B spilled"
                     for k, r in b["resources"].items())
    print(f"build: {b['source']} {b['arch']} NVRTC {b['nvrtc_version']}: {regs}")
for r in d.get("peer_ratios", []):
    print(f"peer: {r['what']}: {r['ratio']:.3f}")
for e in d.get("errors", []):
    print(f"error: {e.get('label')}: {e['error']}")
PY
fi
if [ -f "$out/gpu-families.json" ]; then
  $py - "$out/gpu-families.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for family in ("launch", "transfer", "chase", "elementwise", "conv"):
    for r in d.get(family, []):
        if r["status"] != "ok":
            print(f"{family:11s} {r['label']:52s} FAILED {r['error'][:120]}")
            continue
        if family == "launch":
            fig = f"{r['ns_per_launch'] / 1e3:9.2f} us per launch"
        elif family == "chase":
            lat = r.get("latency") or {}
            fig = f"{lat.get('ns_per_hop', float('nan')):9.1f} ns/hop {lat.get('cycles_per_hop', float('nan')):7.0f} cycles"
        elif family == "conv":
            fig = f"{r['gflops']:9.0f} GFLOP/s nominal {r.get('executed_gflops', 0):9.0f} executed {r['us_per_call']:9.1f} us"
        else:
            fig = f"{r['gbps']:9.1f} GB/s {r['us_per_call']:10.1f} us"
        print(f"{family:11s} {r['label']:52s} {fig}")
for b in d.get("cuda_builds", []):
    if b["source"] in ("conv.cu", "elementwise.cu", "chase.cu", "launch.cu"):
        regs = ", ".join(f"{k}: {r.get('registers')} regs/{r.get('spill_store_bytes')} B spilled" for k, r in b["resources"].items())
        print(f"build: {b['source']} {b['arch']} {b['compile_seconds']:.1f} s: {regs}")
PY
fi
rm -rf "$out/results"
echo "== done in $(( $(date +%s) - start )) s (tests rc=$tests_rc, families rc=$families_rc, ladder rc=$ladder_rc, run rc=$run_rc)"
rc=$(( tests_rc != 0 || families_rc != 0 || ladder_rc != 0 || run_rc > 1 ))
exec 1>&- 2>&-  # close the pipe so that tee has written the whole log before we exit
wait "$tee_pid" 2>/dev/null
exit $rc
