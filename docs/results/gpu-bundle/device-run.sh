#!/usr/bin/env bash
# kvflux on one GPU from the offline bundle alone (the run of 2026-12-05 got an H100 80GB): .device/kvflux-cuda.tar.gz, made on the build host with
#   ./kvflux bundle --platform cuda --out .device/kvflux-cuda.tar.gz --mori target/mori-cuda
# is unpacked here (no JDK, no Maven, no network on this host) and every step runs its bin/kvflux with an
# empty environment but PATH=/usr/bin:/bin. Steps: the reproducer's table on MoRI as a user runs it first;
# the push lag on MoRI and on kvflux's CUDA engine over 200 waits in vLLM's geometry (JSON, p50/p99/max);
# with 4 GiB layers push against sliced-native; then chaos on MoRI (STEPS=chaos). Writes under $OUT.
set -uo pipefail
. "$(dirname "$0")/../bundle-steps.sh"
case "${STEPS:-main}" in
main)
  step repro-mori 150 repro --backend mori --gpu 0 --native-requests 1 --requests 100
  step push-mori 150 repro --backend mori --gpu 0 --wait sliced-native,reactive-push --requests 200 --json
  step push-cuda 120 repro --backend cuda --gpu 0 --wait sliced-native,reactive-push --requests 200 --json
  step big4g-mori 150 repro --backend mori --gpu 0 --processes 1 --layers 2 --blocks 256 --block-bytes 16777216 \
    --forward-bytes 0 --wait sliced-native,reactive-push --requests 6 --json ;;
chaos)
  step chaos-mori 400 chaos --backend mori --gpu 0 --requests 60 --logs $OUT/chaos-logs \
    --faults decode-restart,prefill-kill,prefill-sigterm,client-disconnect,notify-loss ;;
esac
