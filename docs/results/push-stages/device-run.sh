#!/usr/bin/env bash
# The push's lag stage by stage on one GPU, from the offline bundle alone: .device/kvflux-cuda.tar.gz, made on the
# build host with
#   ./kvflux bundle --platform cuda --out .device/kvflux-cuda.tar.gz --mori target/mori-cuda
# is unpacked here (no JDK, no Maven, no network on this host) and every step runs its bin/kvflux with an empty
# environment but PATH=/usr/bin:/bin. STEPS=lag: 200 waits in vLLM's geometry on MoRI and on kvflux's CUDA engine,
# reactive-push against reactive-push-direct, JSON with the stages. STEPS=roles: 4 GiB layers with prefill and decode
# in two processes; serve-bench's table on MoRI with the roles' startup lines; chaos on MoRI with the kill faults.
# STEPS=behind: the push waits again, alone and with a stand-in forward pass of 1 GiB per layer so that the GPU runs
# behind the posts and the copies are still in flight when the wait begins. STEPS=listen: the push-direct waits
# again once a push wait no longer queries, at subscription, the statuses that take a listener. STEPS=after: the
# lag waits after the push wait's end was cut; STEPS=before: the build before it, alternated with the cut one, on the
# same machine. STEPS=bench: serve-bench on MoRI with decode's checks of the KV. STEPS=warm: the lag to the wait's
# end, after --warmup 400 and (CUDA engine) without; STEPS=warm2: the warm runs again; STEPS=bounds: 200 timed
# waits a row after 300 untimed. STEPS=look: the same on the CUDA engine once a push wait looks at its newest
# statuses at subscription, against the build before it, and MoRI's default row. STEPS=look2: the
# same once kvflux repro gives the stages of a wait that ended as it subscribed. STEPS=steady: the CUDA engine's
# default push wait, 200 timed waits after 300 untimed, then in another process after 1,000, past the request count
# at which the JIT's optimizing compiler takes the wait's subscription. STEPS=steady2: the bounds' rows after that
# warm-up, the CUDA engine's then MoRI's. STEPS=settled and settled-cuda: the same rows once a push wait counts the
# statuses that say they settled without giving each a listener, against the build before it, on MoRI and on the
# CUDA engine. STEPS=batched and batched-cuda: the same rows once a push wait hands the waits that pushes end to
# the scheduler in batches, against the build before it.
# Writes under $OUT.
set -uo pipefail
. "$(dirname "$0")/../bundle-steps.sh"
PUSH=reactive-push,reactive-push-direct
case "${STEPS:-lag}" in
lag)
  step push-mori 260 repro --backend mori --gpu 0 --wait $PUSH --requests 200 --json
  step push-cuda 260 repro --backend cuda --gpu 0 --wait $PUSH --requests 200 --json ;;
roles)
  step big4g-p2 110 repro --backend mori --gpu 0 --processes 2 --layers 2 --blocks 256 --block-bytes 16777216 \
    --forward-bytes 0 --wait sliced-native,$PUSH --requests 6 --json
  step serve-bench-mori 230 serve-bench --backend mori --gpu 0 --logs $OUT/bench-logs --policy legacy,sliced,kvflux \
    --concurrency 8,16 --num-prompts 96,192 --input-len 16384 --output-len 16 --warmup 0
  grep -rh "wait reactive\|wait sliced\|wait native" $OUT/bench-logs 2>/dev/null | cut -c1-300 | sort | uniq -c \
    > $OUT/role-waits.txt
  step chaos-mori 230 chaos --backend mori --gpu 0 --requests 60 --logs $OUT/chaos-logs \
    --faults decode-restart,prefill-kill,prefill-sigterm,client-disconnect,notify-loss ;;
behind)
  for e in mori cuda; do
    step direct-$e 110 repro --backend $e --gpu 0 --wait reactive-push-direct --requests 200 --json
    step behind-$e 150 repro --backend $e --gpu 0 --forward-bytes 1073741824 --wait $PUSH --requests 150 --json
  done ;;
listen)
  for e in mori cuda; do
    step listen-$e 100 repro --backend $e --gpu 0 --wait reactive-push-direct --requests 200 --json
  done ;;
after)
  # the same waits with the push wait's end cut (no timer armed when every status had settled, timers disposed at
  # once when waits end sparsely, the lag read from one status)
  for e in mori cuda; do
    step after-$e 220 repro --backend $e --gpu 0 --wait $PUSH --requests 200 --json
  done ;;
before)
  # the library before that cut on the same machine, for the A/B: its operators jar, made on the build host with
  #   git worktree add /tmp/before 3c05d87 && (cd /tmp/before && mvn -q -o package -DskipTests -pl operators -am) &&
  #   mkdir -p .device/old && cp /tmp/before/operators/target/kvflux-operators-*.jar .device/old/
  # swapped into a copy of the bundle; then the cut build again, so that each stands before and after the other
  cp -r $W/kvflux-cuda $W/before && cp "$R"/.device/old/kvflux-operators-*.jar $W/before/lib/ ||
    { echo "no .device/old/kvflux-operators-*.jar: make it as this script's comment says" | tee -a $OUT/summary.log; exit 1; }
  NEW=$K
  for e in mori cuda; do
    K=$W/before/bin/kvflux step before-$e 110 repro --backend $e --gpu 0 --wait reactive-push-direct --requests 200 --json
    K=$NEW step again-$e 110 repro --backend $e --gpu 0 --wait reactive-push-direct --requests 200 --json
  done ;;
warm)
  # the lag timed to the wait's end rather than to the run's bookkeeping after it: after 400 untimed requests per
  # strategy (--warmup; decode does not check their bytes), so that the JIT has compiled the wait's own path, and on
  # the CUDA engine once as it comes
  for e in mori cuda; do
    step warm-$e 260 repro --backend $e --gpu 0 --wait $PUSH --requests 150 --warmup 400 --json
  done
  step cold-cuda 100 repro --backend cuda --gpu 0 --wait reactive-push-direct --requests 150 --json ;;
warm2)
  # the warm runs again on another machine, within the device time left (they ran as three calls on one machine):
  # the CUDA engine's direct push, then the default push on MoRI and on the CUDA engine
  step warm2-cuda 120 repro --backend cuda --gpu 0 --wait reactive-push-direct --requests 150 --warmup 300 --json
  step warm2-mori 140 repro --backend mori --gpu 0 --wait reactive-push --requests 100 --warmup 300 --json
  step warm2-cuda-push 100 repro --backend cuda --gpu 0 --wait reactive-push --requests 100 --warmup 300 --json ;;
bounds)
  # issue 32's rows as it words them: 200 timed waits of the default push wait and the direct one on each engine,
  # after 300 untimed requests each (about 430 s in all on an H100)
  for e in mori cuda; do
    step bounds-$e 280 repro --backend $e --gpu 0 --wait $PUSH --requests 200 --warmup 300 --json
  done ;;
look)
  # the push wait that looks, at subscription, at its newest statuses still in flight: 200 timed waits a row after
  # 300 untimed on the CUDA engine, the build before it (its operators jar in .device/old, made as STEPS=before's
  # comment says, from the commit before the look) alternated with it on the same machine, then MoRI's default row
  cp -r $W/kvflux-cuda $W/before && cp "$R"/.device/old/kvflux-operators-*.jar $W/before/lib/ ||
    { echo "no .device/old/kvflux-operators-*.jar: make it as STEPS=before's comment says" | tee -a $OUT/summary.log; exit 1; }
  NEW=$K
  K=$NEW step look-cuda 280 repro --backend cuda --gpu 0 --wait $PUSH --requests 200 --warmup 300 --json
  K=$W/before/bin/kvflux step before-cuda 140 repro --backend cuda --gpu 0 --wait reactive-push --requests 200 --warmup 300 --json
  K=$NEW step look-mori 140 repro --backend mori --gpu 0 --wait reactive-push --requests 200 --warmup 300 --json ;;
look2)
  # the same build with the stages of a wait that ended as it subscribed: the CUDA engine's two push waits in the
  # other order (the direct one first), then MoRI's default row
  step look2-cuda 280 repro --backend cuda --gpu 0 --wait reactive-push-direct,reactive-push --requests 200 \
    --warmup 300 --json
  step look2-mori 200 repro --backend mori --gpu 0 --wait reactive-push --requests 200 --warmup 300 --json ;;
steady)
  # the default push wait on the CUDA engine alone in its process, timed after 300 untimed requests and then, in a
  # second process, after 1,000: the wait's per-request methods are compiled by C2 only after some 600 calls
  step steady-cuda-w300 180 repro --backend cuda --gpu 0 --wait reactive-push --requests 200 --warmup 300 --json
  step steady-cuda-w1000 380 repro --backend cuda --gpu 0 --wait reactive-push --requests 200 --warmup 1000 --json ;;
steady2)
  # the default push wait's rows once the JIT has compiled it: each engine alone in its process
  step steady2-cuda 300 repro --backend cuda --gpu 0 --wait reactive-push --requests 200 --warmup 1000 --json
  step steady2-mori 270 repro --backend mori --gpu 0 --wait reactive-push --requests 200 --warmup 600 --json ;;
settled|settled-cuda|batched|batched-cuda)
  # a push wait that counts, at subscription, the statuses that say they have settled (PushedStatus.settledCode)
  # in one update, with no listener each (settled), or hands the waits that pushes end over in batches (batched):
  # the default push wait after the JIT's warm-up, this build then the one before it (its operators jar in
  # .device/old, from the commit before the change), each in a process of its own
  cp -r $W/kvflux-cuda $W/before && cp "$R"/.device/old/kvflux-operators-*.jar $W/before/lib/ ||
    { echo "no .device/old/kvflux-operators-*.jar: make it as STEPS=before's comment says" | tee -a $OUT/summary.log; exit 1; }
  NEW=$K
  case "$STEPS" in settled|batched) e=mori n=600 ;; *) e=cuda n=1000 ;; esac
  K=$NEW step ${STEPS%-cuda}-$e 285 repro --backend $e --gpu 0 --wait reactive-push --requests 200 --warmup $n --json
  K=$W/before/bin/kvflux step before-$e 285 repro --backend $e --gpu 0 --wait reactive-push --requests 200 \
    --warmup $n --json ;;
bench)
  # vLLM's table over the real MoRI, with decode's checks of every request's KV printed per run
  step serve-bench-mori 300 serve-bench --backend mori --gpu 0 --logs $OUT/bench-logs --policy legacy,sliced,kvflux \
    --concurrency 8,16 --num-prompts 96,192 --input-len 16384 --output-len 16 --warmup 0
  grep -rh "wait reactive\|wait sliced\|wait native" $OUT/bench-logs 2>/dev/null | cut -c1-300 | sort | uniq -c \
    > $OUT/role-waits.txt ;;
esac
