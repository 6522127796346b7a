#!/usr/bin/env bash
# The roles over the real MoRI IO's xGMI backend on one GPU (both on GPU 0, separate processes): a few requests by
# hand with each role's metrics, then serve-bench's three policies at one transfer timeout. Runs from the offline
# bundle (../bundle-java.sh), whose mori/ holds build.sh's output with libpci and libudev; it first ran from a
# hand-made .device/. Writes under $OUT.
set -uo pipefail
W=/tmp/kvflux-mori-roles
mkdir -p $W
. "$(dirname "$0")/../bundle-java.sh"
{ date -u; nproc; nvidia-smi; ldd $W/mori/libkvflux_mori.so; } > $OUT/machine.log 2>&1

"${J[@]}" proxy > $OUT/proxy.log 2>&1 &
"${J[@]}" decode --backend mori --gpu 0 --kv-blocks 4096 > $OUT/decode.log 2>&1 &
"${J[@]}" prefill --backend mori --gpu 0 --kv-blocks 4096 > $OUT/prefill.log 2>&1 &
for i in $(seq 1 60); do
  curl -sf localhost:11351/health >/dev/null 2>&1 && curl -sf localhost:11352/health >/dev/null 2>&1 && break
  sleep 1
done
sleep 4
for i in $(seq 1 20); do
  curl -s -m 40 localhost:11350/v1/completions -H 'content-type: application/json' \
    -d "{\"prompt\": \"$(printf 'w %.0s' $(seq 1 1000))\", \"max_tokens\": 4}" -o /dev/null -w "%{http_code} %{time_total}\n"
done > $OUT/requests.txt 2>&1
curl -s localhost:11351/metrics | grep -E '^kvflux_(engine|prefill_decode_sessions)' > $OUT/prefill-metrics.txt
curl -s localhost:11352/metrics | grep -E '^kvflux_(engine|decode_kv_check|decode_kv_checked|decode_kv_mismatched|decode_kv_checks)' > $OUT/decode-metrics.txt
kill %1 %2 %3 2>/dev/null
wait
sort $OUT/requests.txt | cut -d' ' -f1 | uniq -c; cat $OUT/prefill-metrics.txt $OUT/decode-metrics.txt
grep -hE "WARN|ERROR" $OUT/prefill.log $OUT/decode.log | head -5 | cut -c1-300

timeout -k 10 ${BENCH_S:-300} "${J[@]}" serve-bench --backend mori --gpu 0 --logs $OUT/bench-logs \
  --policy legacy,seed,kvflux --concurrency 8 --num-prompts 24 --input-len 16384 --output-len 16 \
  --transfer-timeout 3s --warmup 0 > $OUT/serve-bench.txt 2> $OUT/serve-bench.err
echo "serve-bench rc $?" >> $OUT/serve-bench.txt
cat $OUT/serve-bench.txt; grep -E "done in" $OUT/serve-bench.err
