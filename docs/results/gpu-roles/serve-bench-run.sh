#!/usr/bin/env bash
# vLLM's serving experiment on one GPU: kvflux serve-bench --backend cuda, proxy, prefill and decode as processes,
# both roles on GPU 0, 16K-token prompts, 16 output tokens. Runs from the offline
# bundle (../bundle-java.sh); it first ran from a hand-made .device/. Writes under $OUT.
set -uo pipefail
W=/tmp/kvflux-serve
mkdir -p $W
. "$(dirname "$0")/../bundle-java.sh"
{ date -u; nproc; nvidia-smi; } > $OUT/machine.log 2>&1
bench() { # NAME TIMEOUT ARGS...
  local name=$1 t=$2; shift 2
  echo "=== $name: kvflux serve-bench $*" | tee -a $OUT/summary.log
  local s=$(date +%s)
  timeout -k 10 $t "${J[@]}" serve-bench --backend cuda --gpu 0 --logs $OUT/$name-logs "$@" > $OUT/$name.txt 2> $OUT/$name.err
  echo "=== $name: rc $? in $(( $(date +%s) - s )) s" | tee -a $OUT/summary.log
  cat $OUT/$name.txt | tee -a $OUT/summary.log
}
bench fixes ${FIXES_S:-330} --policy seed,kvflux --concurrency 8,16 --num-prompts 96,192 --input-len 16384 --output-len 16 --warmup 0
bench legacy ${LEGACY_S:-200} --policy legacy --concurrency 8 --num-prompts 24 --input-len 16384 --output-len 16 --transfer-timeout 3s --warmup 0
