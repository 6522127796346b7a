#!/usr/bin/env bash
# Push completion on one H200 over the real MoRI IO with kvflux's completion hook. RUN=1: kvflux repro --backend mori
# with every wait strategy in vLLM's geometry, the stand-in forward pass busy beside the copies (8 GiB of scratch
# writes per layer), in both process layouts; then kvflux bench's push wait at N = 1,000 and 10,000 with 1, 2 and 4
# notifier threads on the machine's host. RUN=2: 8 layers of 2 GiB, so that copies are still in flight when the wait
# begins, in both layouts, with the whole-timeout wait too; and vLLM's geometry again. RUN=3: vLLM's geometry in both
# layouts again, after the shim's push was mended (no TransferStatus freed while its hook may still name it).
# RUN=5: the bench's push rows again, after PushWait took pushes through listeners. RUN=6: the bench's push rows
# with 1, 2 and 4 notifiers, each waking at each status's time or at most every 100 us or 1 ms (no MoRI needed).
# RUN=8: 2 layers of 1 GiB on one GPU, so that the last layer's copy is still running when the wait begins, every
# strategy, one process. RUN=9: 2 layers of 4 GiB, the same way. RUN=7: N = 1,000 after 10 warm-up rounds (JSON, each round's figures), and N = 10,000 with 2 and 4 notifiers again. Runs from the offline bundle
# (../bundle-java.sh); it first ran from a hand-made .device/ (a jlink runtime, the jars and MoRI). Writes under $OUT.
set -uo pipefail
W=/tmp/kvflux-push
mkdir -p $W
RUN=${RUN:-1}
. "$(dirname "$0")/../bundle-java.sh"
{ date -u; nproc; nvidia-smi; ldd $W/mori/libkvflux_mori.so; nm -D $W/mori/libmori_io.so | grep -c SetXgmiCompletionHook; } > $OUT/machine.log 2>&1
step() { # NAME TIMEOUT ARGS...
  local name=$1 t=$2; shift 2
  echo "=== $name: kvflux $*" | tee -a $OUT/summary.log
  local s=$(date +%s)
  timeout -k 10 $t "${J[@]}" "$@" > $OUT/$name.txt 2> $OUT/$name.err
  echo "=== $name: rc $? in $(( $(date +%s) - s )) s" | tee -a $OUT/summary.log
  tail -n 16 $OUT/$name.txt | tee -a $OUT/summary.log
}
W4="sliced-native,reactive,reactive-adaptive,reactive-push"
VLLM="--forward-bytes 8589934592"               # vLLM's geometry (118 x 128 x 32 KiB), the forward pass busy
BIG="--layers 8 --block-bytes 16777216 --forward-bytes 0"  # 8 layers of 2 GiB: copies still in flight at the wait
case "${RUN:-1}" in
1)
  step repro-p2 170 repro --backend mori --gpu 0 --processes 2 $VLLM --wait $W4 --requests 40 --transfer-timeout 30s
  step repro-p2-json 60 repro --backend mori --gpu 0 --processes 2 $VLLM --wait $W4 --requests 10 --transfer-timeout 30s --json
  step repro-p2-native 80 repro --backend mori --gpu 0 --processes 2 $VLLM --wait native --requests 1 --transfer-timeout 30s
  step repro-p1 90 repro --backend mori --gpu 0 --processes 1 $VLLM --wait $W4 --requests 20 --transfer-timeout 30s
  for k in 1 2 4; do
    step bench-k$k 80 bench --n 1000,10000 --strategies reactive-push --notifiers $k
  done ;;
2)
  step big-p1 150 repro --backend mori --gpu 0 --processes 1 $BIG --wait native,$W4 --native-requests 1 --requests 30 \
    --transfer-timeout 30s
  step big-p2 120 repro --backend mori --gpu 0 --processes 2 $BIG --wait $W4 --requests 30 --transfer-timeout 30s
  step vllm-p2 120 repro --backend mori --gpu 0 --processes 2 $VLLM --wait $W4 --requests 20 --transfer-timeout 30s ;;
3)
  step vllm-p2 120 repro --backend mori --gpu 0 --processes 2 $VLLM --wait $W4 --requests 20 --transfer-timeout 30s
  step vllm-p1 90 repro --backend mori --gpu 0 --processes 1 $VLLM --wait $W4 --requests 10 --transfer-timeout 30s ;;
5)
  for k in 1 2 4; do
    step bench-k$k 80 bench --n 1000,10000 --strategies reactive-push --notifiers $k
  done ;;
6)
  for k in 1 2 4; do
    for t in 0 100us 1ms; do
      step bench-k$k-tick$t 80 bench --n 1000,10000 --strategies reactive-push --notifiers $k --notifier-tick $t \
        --warmup 3 --rounds 3
    done
  done ;;
7)
  for k in 1 2; do
    for t in 0 1ms; do
      step bench-n1000-k$k-tick$t 80 bench --n 1000 --strategies reactive-push --notifiers $k --notifier-tick $t \
        --warmup 10 --rounds 5 --json
    done
  done
  for k in 2 4; do
    step bench-n10000-k$k 80 bench --n 10000 --strategies reactive-push --notifiers $k --warmup 5 --rounds 5
  done ;;
8)
  step big1g-p1 240 repro --backend mori --gpu 0 --processes 1 --layers 2 --blocks 64 --block-bytes 16777216 \
    --forward-bytes 0 --wait native,$W4 --native-requests 1 --requests 6 --transfer-timeout 30s
  step big1g-p1-json 150 repro --backend mori --gpu 0 --processes 1 --layers 2 --blocks 64 --block-bytes 16777216 \
    --forward-bytes 0 --wait $W4 --requests 4 --transfer-timeout 30s --json ;;
9)
  step big4g-p1 280 repro --backend mori --gpu 0 --processes 1 --layers 2 --blocks 256 --block-bytes 16777216 \
    --forward-bytes 0 --wait native,sliced-native,reactive-adaptive,reactive-push --native-requests 1 --requests 6 \
    --transfer-timeout 30s ;;
esac
date -u >> $OUT/summary.log
# one archive: the machine hands back a few files only
tar -czf /tmp/run$RUN.tgz -C $OUT . && find $OUT -mindepth 1 ! -name summary.log -delete && mv /tmp/run$RUN.tgz $OUT/
