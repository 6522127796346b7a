#!/usr/bin/env bash
# kvflux repro --backend mori on the device machine (run 2): both process layouts, all three strategies.
# Runs from the offline bundle (../bundle-java.sh); it first ran from a jlink runtime, the jars and MoRI carried
# beside it. FORWARD: bytes of scratch per layer (0: none).
set -uo pipefail
W=/tmp/kvflux-mori
mkdir -p $W
. "$(dirname "$0")/../bundle-java.sh"
CLI="repro --backend mori --forward-bytes ${FORWARD:-0}"
{
  date -u; pwd; git log -1 --oneline 2>/dev/null; nproc
  nvidia-smi; nvidia-smi topo -m
  ls -la /usr/local/cuda/lib64/libcudart.so* ; ldconfig -p | grep -E 'libcuda.so.1|libpci|librocm_smi|libudev'
  ls /sys/class/infiniband 2>&1
  for l in $W/mori/lib*.so; do echo "== $l"; ldd $l | grep -E 'cuda|mori|pci|not found'; done
} > $OUT/machine.log 2>&1
step() { # NAME TIMEOUT ARGS...
  local name=$1 t=$2; shift 2
  echo "=== $name: $CLI $*" | tee -a $OUT/summary.log
  local s=$(date +%s)
  timeout -k 10 $t "${J[@]}" $CLI "$@" > $OUT/$name.log 2>&1
  local rc=$?
  echo "=== $name: rc $rc in $(( $(date +%s) - s )) s" | tee -a $OUT/summary.log
  tail -n 12 $OUT/$name.log
  return $rc
}
echo "forward bytes per layer: ${FORWARD:-0}" | tee -a $OUT/summary.log
step p1-native 140 --processes 1 --wait native --requests 3 --transfer-timeout 30s
step p1-fast 120 --processes 1 --wait sliced-native,reactive --requests 20 --transfer-timeout 30s
step p2-native 150 --processes 2 --wait native --requests 3 --transfer-timeout 30s
step p2-fast 120 --processes 2 --wait sliced-native,reactive --requests 20 --transfer-timeout 30s
date -u >> $OUT/summary.log
