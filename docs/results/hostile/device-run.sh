#!/usr/bin/env bash
# kvflux hostile on the GPU machine's host (16 cores), three runs of the default attack, with the notify bulk rate.
# Runs from the offline bundle (../bundle-java.sh); it first ran from a hand-made .device/ (a jlink runtime and the
# jars). Writes under $OUT, one archive at the end.
set -uo pipefail
W=/tmp/kvflux-hostile
mkdir -p $W
. "$(dirname "$0")/../bundle-java.sh"
{ date -u; nproc; lscpu | grep -E 'Model name|^CPU\(s\)'; free -g; uname -r; } > $OUT/machine.txt 2>&1
for i in ${RUNS:-1 2 3}; do
  s=$(date +%s)
  { echo "# command: kvflux hostile   (GPU machine's host, $(nproc) cores; $(date -u +%FT%TZ))"
    timeout -k 10 170 "${J[@]}" hostile 2>&1; echo "# rc $? in $(( $(date +%s) - s )) s"; } > $OUT/h200-16core-bulk16-run$i.txt
  grep -E 'ack_p99|rss_peak_growth|hostile_seconds|# rc' $OUT/h200-16core-bulk16-run$i.txt
done
tar -czf $OUT/hostile.tgz -C $OUT --exclude '*.tgz' .
