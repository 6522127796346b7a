#!/usr/bin/env bash
# WRITE and READ mode side by side on one GPU: kvflux serve-bench --kv-mode write,read over kvflux's CUDA copy engine
# and over the real MoRI IO, both roles on GPU 0 as processes, vLLM's experiment at c16 (PROMPTS requests, 192 by
# default; 16K-token prompts, 16 output tokens), every block checked on decode. Runs from the offline
# bundle (../bundle-java.sh), whose runtime has java.net.http (serve-bench probes its role processes over HTTP); it
# first ran from a hand-made .device/. Writes under $OUT.
set -uo pipefail
W=/tmp/kvflux-read
mkdir -p $W
. "$(dirname "$0")/../bundle-java.sh"
{ date -u; nproc; nvidia-smi; } > $OUT/machine.log 2>&1
bench() { # BACKEND TIMEOUT
  local backend=$1 t=$2
  echo "=== $backend: kvflux serve-bench --backend $backend --kv-mode write,read" | tee -a $OUT/summary.log
  local s=$(date +%s)
  timeout -k 10 $t "${J[@]}" serve-bench --backend $backend --gpu 0 --logs $OUT/$backend-logs --kv-mode write,read \
    --policy kvflux --concurrency 16 --num-prompts ${PROMPTS:-192} --input-len 16384 --output-len 16 --warmup 0 \
    > $OUT/$backend.txt 2> $OUT/$backend.err
  echo "=== $backend: rc $? in $(( $(date +%s) - s )) s" | tee -a $OUT/summary.log
  cat $OUT/$backend.txt | tee -a $OUT/summary.log
  # the decode logs' errors, if any (no match is the good outcome, not a failure of the script)
  for log in $OUT/$backend-logs/*decode.log; do
    grep -hE "ERROR|corrupt" $log | head -3 | cut -c1-300 || true
  done
  return 0
}
bench cuda ${CUDA_S:-150}
bench mori ${MORI_S:-150}
