#!/usr/bin/env bash
# kvflux repro --backend mori on the device machine (run 2): both process layouts, all three strategies.
# Carried beside it: jre.tar.xz (a jlink image of Temurin 25), lib/ (the jars), mori/ (build.sh --platform cuda
# output, plus Debian's libpci.so.3 and libudev.so.1). FORWARD: bytes of scratch per layer (0: none).
set -uo pipefail
B="$(cd "$(dirname "$0")" && pwd)"
W=/tmp/kvflux-mori
mkdir -p $W
tar -xJf $B/jre.tar.xz -C $W
cp -r $B/lib $B/mori $W/
J=("$W/jre/bin/java" --enable-native-access=ALL-UNNAMED -Xmx8g "-Dkvflux.mori.lib=$W/mori/libkvflux_mori.so" "-Dkvflux.gpu.forward-bytes=${FORWARD:-0}" -cp "$W/lib/*")
CLI="dev.kvflux.pipeline.cli.KvfluxCli repro --backend mori"
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
