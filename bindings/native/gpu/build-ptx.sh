#!/bin/sh
# Builds the scatter/gather kernel to PTX (kvflux_scatter_gather.ptx) into the given directory, when
# the CUDA compiler is installed; without it, says so and builds nothing (the jar then has no kernel,
# and the scatter/gather copy path reports that when it is asked for).
# The Maven build runs it in generate-resources with the directory of the class that loads the kernel,
# so the PTX ships inside the jar. nvcc is $NVCC, else on the PATH, else /usr/local/cuda/bin/nvcc.
set -eu
out="${1:?usage: build-ptx.sh OUTPUT_DIRECTORY}"
here="$(cd "$(dirname "$0")" && pwd)"
nvcc="${NVCC:-}"
if [ -z "$nvcc" ]; then
    nvcc="$(command -v nvcc 2>/dev/null || true)"
fi
if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
    nvcc=/usr/local/cuda/bin/nvcc
fi
if [ -z "$nvcc" ]; then
    echo "build-ptx.sh: nvcc not found (no \$NVCC, none on the PATH, no /usr/local/cuda/bin/nvcc);" \
        "the scatter/gather kernel is not built" >&2
    exit 0
fi
mkdir -p "$out"
"$nvcc" -ptx -arch=compute_90 -o "$out/kvflux_scatter_gather.ptx" "$here/kvflux_scatter_gather.cu"
