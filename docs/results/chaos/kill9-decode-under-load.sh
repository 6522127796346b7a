#!/bin/bash
# kill -9 decode mid-load, restart it; watch prefill's and proxy's RSS and fds, and time to the next success
cd "$(dirname "$0")/../../.."
K=./kvflux
P=18300; D=18310; PR=18320
$K proxy --port $P --discovery-port $((P+1)) > /tmp/k9-proxy.log 2>&1 & PX=$!
sleep 4
$K prefill --http-port $PR --notify-port $((PR+1)) --proxy http://127.0.0.1:$((P+1)) > /tmp/k9-prefill.log 2>&1 & PF=$!
$K decode --http-port $D --notify-port $((D+1)) --proxy http://127.0.0.1:$((P+1)) > /tmp/k9-decode.log 2>&1 & DC=$!
sleep 8
rss() { awk '/VmRSS/{print int($2/1024)}' /proc/$1/status; }
fds() { ls /proc/$1/fd | wc -l; }
snap() { echo "$1 prefill rss=$(rss $PF)MiB fds=$(fds $PF) proxy rss=$(rss $PX)MiB fds=$(fds $PX)"; }
load200() { local pids=(); for i in $(seq 1 200); do req >/dev/null & pids+=($!); if (( i % 16 == 0 )); then wait "${pids[@]}"; pids=(); fi; done; wait "${pids[@]}"; }
req() { curl -s -m 20 -o /dev/null -w "%{http_code}" http://127.0.0.1:$P/v1/completions -H 'content-type: application/json' -d '{"prompt":"a b c d e f g h","max_tokens":4}'; }
# warm-up load
load200
snap before
# load running while decode is killed
( for i in $(seq 1 400); do echo "$(req)" >> /tmp/k9-codes1.txt; done ) & L1=$!
( for i in $(seq 1 400); do echo "$(req)" >> /tmp/k9-codes2.txt; done ) & L2=$!
sleep 2
kill -9 $DC; T0=$(date +%s.%N); echo "killed decode -9 at $T0"
sleep 1
$K decode --http-port $D --notify-port $((D+1)) --proxy http://127.0.0.1:$((P+1)) > /tmp/k9-decode2.log 2>&1 & DC=$!
until [ "$(req)" = "200" ]; do sleep 0.05; done; T1=$(date +%s.%N)
echo "first 200 after kill: $(echo "$T1 - $T0" | bc) s (restart began 1 s after the kill)"
wait $L1 $L2; sleep 1
snap after-load
for i in $(seq 1 3); do kill -9 $DC; sleep 0.5; $K decode --http-port $D --notify-port $((D+1)) --proxy http://127.0.0.1:$((P+1)) > /tmp/k9-decode3.log 2>&1 & DC=$!; until [ "$(req)" = "200" ]; do sleep 0.05; done; done
load200
sleep 2; snap "after 4 kill -9 restarts + 200 more"
echo "codes during the first kill: $(cat /tmp/k9-codes1.txt /tmp/k9-codes2.txt | sort | uniq -c | tr '\n' ' ')"
curl -s http://127.0.0.1:$PR/metrics | grep -E '^kvflux_blocks\{|kvflux_prefill_transfers_running|kvflux_prefill_transfers_failed_peer_restart_total' 
kill $PX $PF $DC; sleep 3
