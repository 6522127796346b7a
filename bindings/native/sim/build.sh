#!/bin/sh
# Builds the MoRI IO simulator (libkvflux_mori_sim.so) into the given directory.
# The Maven build runs it in generate-resources, so the library ships inside the jar under
# /native/linux-x86_64/. Needs gcc and the C library headers (Debian: gcc, libc6-dev).
set -eu
out="${1:?usage: build.sh OUTPUT_DIRECTORY}"
here="$(cd "$(dirname "$0")" && pwd)"
command -v "${CC:-gcc}" >/dev/null 2>&1 || {
    echo "build.sh: ${CC:-gcc} not found; install gcc and libc6-dev (apt-get install gcc libc6-dev)" >&2
    exit 1
}
# The simulator's sources, one concern each (sim_internal.h says which), and its msgpack subset.
sources="sim_library.c sim_handles.c sim_status.c sim_engine.c sim_mem.c sim_session.c sim_share.c sim_push.c msgpack_lite.c"
mkdir -p "$out"
set --
for s in $sources; do
    set -- "$@" "$here/$s"
done
"${CC:-gcc}" -std=c11 -O2 -g -Wall -Wextra -Werror -fPIC -shared -pthread -fvisibility=hidden \
    -o "$out/libkvflux_mori_sim.so" "$@"
