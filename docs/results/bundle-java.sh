# Sourced by the device scripts written before `kvflux bundle` existed: unpacks the offline bundle
# .device/kvflux-cuda.tar.gz (made on the build host with
#   ./kvflux bundle --platform cuda --out .device/kvflux-cuda.tar.gz --mori target/mori-cuda)
# into $W, which the script sets, and sets J to the bundle's launcher. $W/mori is its MoRI libraries, which the
# launcher puts on the library path.
tar -xzf "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.device/kvflux-cuda.tar.gz" -C "$W"
ln -sfn "$W/kvflux-cuda/mori" "$W/mori"
J=("$W/kvflux-cuda/bin/kvflux")
