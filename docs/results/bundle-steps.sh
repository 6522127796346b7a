# Sourced by the device scripts that run kvflux from the offline bundle: unpacks .device/kvflux-cuda.tar.gz (made on
# the build host with ./kvflux bundle --platform cuda --out .device/kvflux-cuda.tar.gz --mori target/mori-cuda) into
# /tmp/kvflux-bundle, notes the machine in $OUT/machine.log, and defines step NAME TIMEOUT ARGS..., which runs the
# bundle's bin/kvflux ARGS with an empty environment but PATH=/usr/bin:/bin, its output in $OUT/NAME.txt and .err,
# its exit code and time in $OUT/summary.log.
R="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
W=/tmp/kvflux-bundle
rm -rf $W && mkdir -p $W
tar -xzf "$R/.device/kvflux-cuda.tar.gz" -C $W
K=$W/kvflux-cuda/bin/kvflux
{
  date -u; nproc; nvidia-smi
  echo "java on PATH: $(command -v java || echo none); mvn on PATH: $(command -v mvn || echo none)"
  ls $W/kvflux-cuda $W/kvflux-cuda/mori; du -sh $W/kvflux-cuda
  ldd $W/kvflux-cuda/mori/libkvflux_mori.so
} > $OUT/machine.log 2>&1
step() { # NAME TIMEOUT ARGS...
  local name=$1 t=$2; shift 2
  echo "=== $name: bin/kvflux $*" | tee -a $OUT/summary.log
  local s=$(date +%s)
  env -i PATH=/usr/bin:/bin HOME=/tmp timeout -k 10 $t $K "$@" > $OUT/$name.txt 2> $OUT/$name.err
  echo "=== $name: rc $? in $(( $(date +%s) - s )) s" | tee -a $OUT/summary.log
  tail -n 14 $OUT/$name.txt | cut -c1-400 | tee -a $OUT/summary.log
}
