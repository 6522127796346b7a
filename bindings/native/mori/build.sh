#!/usr/bin/env bash
# Builds the real MoRI IO and kvflux's shim over it, with g++, for one GPU platform:
#
#   bindings/native/mori/build.sh --platform cuda|hip [--sources DIR] [--out DIR] [--jobs N]
#
#   cuda  HIP's NVIDIA platform over the CUDA toolkit (CUDA_HOME, default /usr/local/cuda): every hip*
#         call is an inline wrapper over the CUDA runtime and driver; for NVIDIA GPUs.
#   hip   the HIP runtime from ROCm or Debian's libamdhip64-dev (headers in ROCM_PATH/include or
#         /usr/include); for AMD GPUs.
#
# Sources: --sources DIR (unpacked trees mori/ spdlog/ msgpack-c/ hip/ hipother/ clr/, or their .tar.gz
# archives), else ../shared/third_party beside the repository when present, else a clone of the pinned
# commits (needs network access). The pins are those of ../shared/third_party/MANIFEST.md.
#
# Output (default target/mori-<platform>): lib/ holds libmori_io.so, libmori_application.so and
# libkvflux_mori.so, found by each other through RPATH $ORIGIN. Point kvflux at lib/libkvflux_mori.so
# (-Dkvflux.mori.lib=... or KVFLUX_MORI_LIB). On a host without the NVIDIA driver the cuda build links
# against a generated stub of libcuda.so.1 kept in link-stub/, never in lib/: at run time the driver's
# own libcuda.so.1 is used.
#
# kvflux's changes to the sources are the patch files in patches/ (patches/all: MoRI, every platform,
# each change guarded; patches/cuda: HIP's NVIDIA headers for CUDA 13). None changes behaviour on ROCm 6+.
#
# Needs: g++ (C++20), cmake, make, libibverbs-dev, libpci-dev, librocm-smi-dev, libhsa-runtime-dev, and for --platform hip
# libamdhip64-dev; for --platform cuda the CUDA toolkit.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"

MORI_URL=https://github.com/ROCm/mori.git
MORI_PIN=624002c897a30928ec04c14fc167bf2b8a93f6ce
SPDLOG_URL=https://github.com/gabime/spdlog.git
SPDLOG_PIN=4a9ccf7e38e257feecce0c579a782741254eaeef
MSGPACK_URL=https://github.com/msgpack/msgpack-c.git
MSGPACK_PIN=e9e06a546c447ba7f04e3eec285071ad9cf5044f
HIP_URL=https://github.com/ROCm/HIP.git
HIPOTHER_URL=https://github.com/ROCm/hipother.git
CLR_URL=https://github.com/ROCm/clr.git
ROCM_TAG=rocm-6.0.2

usage() {
    echo "usage: $0 --platform cuda|hip [--sources DIR] [--out DIR] [--jobs N]" >&2
    exit 2
}

platform="" sources="" out="" jobs="$(nproc 2>/dev/null || echo 2)"
while [ $# -gt 0 ]; do
    case "$1" in
        --platform) platform="${2:-}"; shift 2 || usage ;;
        --sources) sources="${2:-}"; shift 2 || usage ;;
        --out) out="${2:-}"; shift 2 || usage ;;
        --jobs) jobs="${2:-}"; shift 2 || usage ;;
        -h|--help) usage ;;
        *) echo "build.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
case "$platform" in
    cuda|hip) ;;
    "") echo "build.sh: --platform is required (cuda for NVIDIA GPUs, hip for AMD GPUs)" >&2; exit 2 ;;
    *) echo "build.sh: --platform '$platform' is neither cuda nor hip" >&2; exit 2 ;;
esac
out="${out:-$repo/target/mori-$platform}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
src="$out/src"
obj="$out/obj"
lib="$out/lib"
rm -rf "$src" "$obj" "$lib" "$out/link-stub" "$out/shim-build"
mkdir -p "$src" "$obj" "$lib"

need() {
    command -v "$1" >/dev/null 2>&1 || { echo "build.sh: $1 not found; $2" >&2; exit 1; }
}
need g++ "install g++ (Debian: apt-get install g++)"
need cmake "install cmake (Debian: apt-get install cmake)"
need make "install make"
need patch "install patch (Debian: apt-get install patch)"
[ -f /usr/include/infiniband/verbs.h ] || { echo "build.sh: infiniband/verbs.h missing; apt-get install libibverbs-dev" >&2; exit 1; }
[ -f /usr/include/pci/pci.h ] || [ -f /usr/include/x86_64-linux-gnu/pci/pci.h ] || { echo "build.sh: pci/pci.h missing; apt-get install libpci-dev" >&2; exit 1; }
[ -f /usr/include/rocm_smi/rocm_smi.h ] || [ -f /opt/rocm/include/rocm_smi/rocm_smi.h ] ||
    { echo "build.sh: rocm_smi/rocm_smi.h missing; apt-get install librocm-smi-dev" >&2; exit 1; }
[ -f /usr/include/hsa/hsa.h ] || [ -f /opt/rocm/include/hsa/hsa.h ] ||
    { echo "build.sh: hsa/hsa.h missing (MoRI's RDMA providers include it on every platform); apt-get install libhsa-runtime-dev" >&2; exit 1; }

# ---- sources ------------------------------------------------------------------------------------
trees="mori spdlog msgpack-c hip hipother clr"
archive_of() {
    case "$1" in
        mori) echo mori.tar.gz ;; spdlog) echo spdlog.tar.gz ;; msgpack-c) echo msgpack-c-include.tar.gz ;;
        hip) echo hip-include.tar.gz ;; hipother) echo hipother-hipnv-include.tar.gz ;; clr) echo clr-pt-api.tar.gz ;;
    esac
}
take_from() { # DIR: copy unpacked trees or unpack archives into $src
    local dir="$1" t
    for t in $trees; do
        if [ -d "$dir/$t" ]; then
            cp -a "$dir/$t" "$src/"
        elif [ -f "$dir/$(archive_of "$t")" ]; then
            tar -xzf "$dir/$(archive_of "$t")" -C "$src"
        else
            echo "build.sh: $dir has neither $t/ nor $(archive_of "$t")" >&2
            exit 1
        fi
    done
}
clone_pin() { # NAME URL REF: a shallow checkout of one commit or tag
    local name="$1" url="$2" ref="$3"
    git init -q "$src/$name"
    git -C "$src/$name" fetch -q --depth 1 "$url" "$ref" || {
        echo "build.sh: could not fetch $url at $ref (no network access?); pass --sources DIR with the pinned" \
             "trees or archives (see ../shared/third_party/MANIFEST.md)" >&2
        exit 1
    }
    git -C "$src/$name" checkout -q FETCH_HEAD
}
if [ -n "$sources" ]; then
    [ -d "$sources" ] || { echo "build.sh: --sources $sources is not a directory" >&2; exit 2; }
    echo "build.sh: sources from --sources $(cd "$sources" && pwd)"
    take_from "$sources"
elif [ -d "$repo/../shared/third_party" ]; then
    echo "build.sh: sources from $(cd "$repo/../shared/third_party" && pwd) (pinned archives)"
    take_from "$repo/../shared/third_party"
else
    need git "install git, or pass --sources DIR with the pinned trees"
    echo "build.sh: sources cloned at the pinned commits (no --sources, no ../shared/third_party)"
    clone_pin mori "$MORI_URL" "$MORI_PIN"
    clone_pin spdlog "$SPDLOG_URL" "$SPDLOG_PIN"
    clone_pin msgpack-c "$MSGPACK_URL" "$MSGPACK_PIN"
    clone_pin hip "$HIP_URL" "refs/tags/$ROCM_TAG"
    clone_pin hipother "$HIPOTHER_URL" "refs/tags/$ROCM_TAG"
    clone_pin clr "$CLR_URL" "refs/tags/$ROCM_TAG"
fi

# ---- our patches ----------------------------------------------------------------------------------
apply() { # DIR PATCH
    echo "build.sh: patch $(basename "$2")"
    patch -s -p1 -d "$1" --no-backup-if-mismatch <"$2"
}
for p in "$here"/patches/all/*.patch; do apply "$src/mori" "$p"; done

# ---- the GPU runtime ------------------------------------------------------------------------------
if [ "$platform" = cuda ]; then
    cuda="${CUDA_HOME:-/usr/local/cuda}"
    [ -f "$cuda/include/cuda_runtime.h" ] && [ -e "$cuda/lib64/libcudart.so" ] || {
        echo "build.sh: the CUDA toolkit was not found in $cuda (cuda_runtime.h, lib64/libcudart.so); install it" \
             "or set CUDA_HOME" >&2
        exit 1
    }
    # HIP's NVIDIA platform: HIP's API headers, hipother's NVIDIA implementation, clr's per-thread API
    # header (included unconditionally), and the version header HIP's own build would generate.
    hipinc="$out/hip-include"
    rm -rf "$hipinc"
    mkdir -p "$hipinc/hip/amd_detail"
    cp -a "$src/hip/include/." "$hipinc/"
    cp -a "$src/hipother/hipnv/include/." "$hipinc/"
    cp "$src/clr/hipamd/include/hip/amd_detail/amd_hip_runtime_pt_api.h" "$hipinc/hip/amd_detail/"
    for p in "$here"/patches/cuda/*.patch; do apply "$hipinc" "$p"; done
    cat >"$hipinc/hip/hip_version.h" <<'EOF'
// Written by kvflux's bindings/native/mori/build.sh: the version of the HIP headers used (rocm-6.0.2).
#pragma once
#define HIP_VERSION_MAJOR 6
#define HIP_VERSION_MINOR 0
#define HIP_VERSION_PATCH 2
#define HIP_VERSION_GITHASH ""
#define HIP_VERSION_BUILD_ID 0
#define HIP_VERSION_BUILD_NAME ""
#define HIP_VERSION (HIP_VERSION_MAJOR * 10000000 + HIP_VERSION_MINOR * 100000 + HIP_VERSION_PATCH)
EOF
    platform_flags="-U__HIP_PLATFORM_AMD__ -D__HIP_PLATFORM_NVIDIA__ -I$hipinc -I$cuda/include"
    runtime_lib="$cuda/lib64/libcudart.so"
    runtime_link="-L$cuda/lib64 -lcudart -lcuda"
    runtime_rpath="$cuda/lib64"
    hip_include_dir="$hipinc"
else
    rocm="${ROCM_PATH:-/opt/rocm}"
    if [ -f "$rocm/include/hip/hip_runtime_api.h" ]; then hip_include_dir="$rocm/include"; else hip_include_dir=/usr/include; fi
    runtime_lib="$(ls "$rocm"/lib/libamdhip64.so /usr/lib/x86_64-linux-gnu/libamdhip64.so 2>/dev/null | head -1 || true)"
    [ -f "$hip_include_dir/hip/hip_runtime_api.h" ] && [ -n "$runtime_lib" ] || {
        echo "build.sh: the HIP runtime was not found (hip/hip_runtime_api.h, libamdhip64.so); install ROCm or" \
             "Debian's libamdhip64-dev, and set ROCM_PATH if ROCm is not in /opt/rocm" >&2
        exit 1
    }
    platform_flags="-D__HIP_PLATFORM_AMD__ -I$hip_include_dir"
    runtime_link="-L$(dirname "$runtime_lib") -lamdhip64"
    runtime_rpath="$(dirname "$runtime_lib")"
fi

# ---- compile ----------------------------------------------------------------------------------------
cxx="g++ -std=c++20 -O2 -fPIC -g0 -w"
mori_flags="$platform_flags -DMSGPACK_NO_BOOST -DSPDLOG_COMPILED_LIB -I$src/mori/include -I$src/mori \
-I$src/msgpack-c/include -I$src/spdlog/include -I/opt/rocm/include"
spdlog_sources="spdlog stdout_sinks color_sinks file_sinks async cfg fmt"
app_sources="transport/tcp/tcp transport/rdma/rdma transport/rdma/providers/ibverbs/ibverbs topology/gpu \
topology/net topology/node topology/pci topology/system"
io_sources="engine rdma/protocol rdma/backend_impl rdma/async_event_monitor rdma/executor rdma/common \
rdma/ledger xgmi/backend_impl xgmi/hip_resource_pool fabric/backend_impl fabric/vpod_topology \
fabric/torch_allocator"

jobsfile="$out/compile.jobs"
: >"$jobsfile"
for s in $spdlog_sources; do
    echo "$cxx -fvisibility=hidden -fvisibility-inlines-hidden -DSPDLOG_COMPILED_LIB -I$src/spdlog/include -c $src/spdlog/src/$s.cpp -o $obj/spdlog-$s.o" >>"$jobsfile"
done
for s in $app_sources; do
    echo "$cxx $mori_flags -c $src/mori/src/application/$s.cpp -o $obj/app-${s//\//-}.o" >>"$jobsfile"
done
echo "$cxx $mori_flags -fvisibility=hidden -fvisibility-inlines-hidden -c $src/mori/src/application/transport/rdma/providers/ibverbs/ibv_shim.cpp -o $obj/ibv_shim.o" >>"$jobsfile"
for s in $io_sources; do
    echo "$cxx $mori_flags -c $src/mori/src/io/$s.cpp -o $obj/io-${s//\//-}.o" >>"$jobsfile"
done
started=$(date +%s)
echo "build.sh: compiling $(wc -l <"$jobsfile") sources for $platform with $jobs jobs"
if ! tr '\n' '\0' <"$jobsfile" | xargs -0 -P "$jobs" -I{} sh -c '{} || { echo "build.sh: failed: {}" >&2; exit 255; }'; then
    echo "build.sh: compiling failed (see above)" >&2
    exit 1
fi
ar rcs "$obj/libspdlog.a" "$obj"/spdlog-*.o

# A stand-in libcuda.so.1 to link against where the NVIDIA driver is not installed: every cu* symbol the
# objects use, as empty functions. Never shipped: at run time the driver's library is loaded.
if [ "$platform" = cuda ]; then
    if ! ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1 '; then
        stub="$out/link-stub"
        mkdir -p "$stub"
        nm -u "$obj"/*.o | awk '{print $2}' | grep -E '^cu[A-Z]' | sort -u |
            sed 's/.*/void &(void) {}/' >"$stub/libcuda-stub.c"
        gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$stub/libcuda.so.1" "$stub/libcuda-stub.c"
        ln -sf libcuda.so.1 "$stub/libcuda.so"
        runtime_link="-L$stub $runtime_link"
        echo "build.sh: no NVIDIA driver here: linking against a stub libcuda.so.1 ($(wc -l <"$stub/libcuda-stub.c") symbols)"
    fi
fi

link_flags="-shared -Wl,--no-undefined -Wl,-rpath,\$ORIGIN:$runtime_rpath"
# shellcheck disable=SC2086
g++ $link_flags -Wl,-soname,libmori_application.so -o "$lib/libmori_application.so" \
    "$obj"/app-*.o "$obj/ibv_shim.o" "$obj/libspdlog.a" $runtime_link -lpci -ldl -lpthread
# shellcheck disable=SC2086
g++ $link_flags -Wl,-soname,libmori_io.so -o "$lib/libmori_io.so" \
    "$obj"/io-*.o "$obj/ibv_shim.o" -L"$lib" -lmori_application "$obj/libspdlog.a" $runtime_link -ldl -lpthread

# ---- kvflux's shim, with its own CMake ------------------------------------------------------------------
# (CMakeLists.txt lists its sources: kvflux_mori.cpp, the ABI; kvflux_push.cpp, push completion over the patched
# xGMI backend's completion hook; rdma_preflight.cpp, the RDMA check)
shim_flags="-Wno-deprecated-declarations"
[ "$platform" = cuda ] && shim_flags="$shim_flags -U__HIP_PLATFORM_AMD__ -D__HIP_PLATFORM_NVIDIA__ -I$cuda/include"
shim_link="-Wl,-rpath-link,$lib"
[ -n "${stub:-}" ] && shim_link="$shim_link -L$stub -Wl,-rpath-link,$stub"
cmake -S "$here" -B "$out/shim-build" -DCMAKE_BUILD_TYPE=Release \
    -DMORI_INCLUDE_DIR="$src/mori/include" -DMORI_MSGPACK_INCLUDE_DIR="$src/msgpack-c/include" \
    -DMORI_IO_LIBRARY="$lib/libmori_io.so" -DHIP_INCLUDE_DIR="$hip_include_dir" -DHIP_LIBRARY="$runtime_lib" \
    -DCMAKE_CXX_FLAGS="$shim_flags" -DCMAKE_SHARED_LINKER_FLAGS="$shim_link" >"$out/shim-build.log" 2>&1 ||
    { cat "$out/shim-build.log" >&2; exit 1; }
cmake --build "$out/shim-build" -j "$jobs" >>"$out/shim-build.log" 2>&1 || { cat "$out/shim-build.log" >&2; exit 1; }
cp "$out/shim-build/libkvflux_mori.so" "$lib/"

echo "build.sh: built for $platform in $(( $(date +%s) - started )) s of compiling and linking, into $lib:"
for l in libmori_application.so libmori_io.so libkvflux_mori.so; do
    echo "  $l ($(du -k "$lib/$l" | cut -f1) KiB), runtime libraries it links:"
    ldd "$lib/$l" | grep -E 'cudart|libcuda|amdhip|mori|pci|spdlog|not found' | sed 's/^[[:space:]]*/    /' || true
done
