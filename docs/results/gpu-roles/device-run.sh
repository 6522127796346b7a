#!/usr/bin/env bash
# The roles over kvflux's CUDA copy engine on one GPU (both on GPU 0): a few requests by hand with each role's
# metrics, then kill -9 faults through kvflux chaos. Runs from the offline bundle
# (../bundle-java.sh); it first ran from a hand-made .device/ (a jlink runtime and the jars). Writes under $OUT.
set -uo pipefail
W=/tmp/kvflux-roles
mkdir -p $W
. "$(dirname "$0")/../bundle-java.sh"
{ date -u; nproc; nvidia-smi; ls -la /usr/local/cuda/lib64/libcudart.so* 2>&1; } > $OUT/machine.log 2>&1

# 1. by hand: proxy, decode and prefill on GPU 0, 20 requests, the roles' engine and check meters
"${J[@]}" proxy > $OUT/proxy.log 2>&1 &
"${J[@]}" decode --backend cuda --gpu 0 --kv-blocks 4096 > $OUT/decode.log 2>&1 &
"${J[@]}" prefill --backend cuda --gpu 0 --kv-blocks 4096 > $OUT/prefill.log 2>&1 &
for i in $(seq 1 60); do
  curl -sf localhost:11351/health >/dev/null 2>&1 && curl -sf localhost:11352/health >/dev/null 2>&1 && break
  sleep 1
done
sleep 4
s=$(date +%s%N)
for i in $(seq 1 20); do
  curl -s -m 30 localhost:11350/v1/completions -H 'content-type: application/json' \
    -d "{\"prompt\": \"$(printf 'w %.0s' $(seq 1 1000))\", \"max_tokens\": 4}" | head -c 160
  echo
done > $OUT/requests.log 2>&1
echo "20 requests in $(( ($(date +%s%N) - s) / 1000000 )) ms" >> $OUT/requests.log
curl -s localhost:11351/metrics | grep -E '^kvflux_(engine|prefill_decode_sessions|prefill_writes_total)' > $OUT/prefill-metrics.txt
curl -s localhost:11352/metrics | grep -E '^kvflux_(engine|decode_kv)' > $OUT/decode-metrics.txt
kill %1 %2 %3 2>/dev/null
wait
tail -n 4 $OUT/requests.log; cat $OUT/prefill-metrics.txt $OUT/decode-metrics.txt

# 2. kill -9 while copies are in flight, and the other faults a GPU backend has, through kvflux chaos
timeout -k 10 ${CHAOS_S:-420} "${J[@]}" chaos --backend cuda --requests ${REQUESTS:-100} --logs $OUT/chaos-logs \
  --faults decode-restart,prefill-kill,prefill-sigterm,client-disconnect,notify-loss > $OUT/chaos.txt 2> $OUT/chaos.err
echo "chaos rc $?" >> $OUT/chaos.txt
cat $OUT/chaos.txt
