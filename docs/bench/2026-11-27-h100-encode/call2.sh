#!/bin/bash
# One-GPU call after the PTX parameter-table fix: the whole suite, the
# by-name launches under memcheck with API reports on (gpu-core's PTX test
# module and kernel-trees' cubins), then the large encode again with the
# host's peak RSS read from the encode process itself.
set -u
REPO=$PWD
for f in .gl/*.deb; do dpkg -x "$f" / >/dev/null 2>&1; done; ldconfig
mkdir -p /tmp/b && tar xJf target/gpu-bundle.tar.xz -C /tmp/b
cd /tmp/b/gpu-bundle
timeout 300 bash run.sh tests > $OUT/tests-full.log 2>&1
grep -n "<== .*FAIL\|gpu-bundle:\|KILN_REQUIRE_GPU=" $OUT/tests-full.log
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for t in gpu-core__gpu kernel-trees__byname; do
  echo "memcheck (API reports on) $t by_name"
  timeout 90 $SAN --tool memcheck --leak-check full --error-exitcode 99 ./bin/$t --test-threads=1 by_name 2>&1 | tail -3; echo "rc=${PIPESTATUS[0]}"
done
echo "=== encode"; date +%s.%N
APPS=/tmp/b/gpu-bundle/bin/apps
W=/tmp/enc; rm -rf $W; mkdir -p $W; cd $W
export CUDA_VISIBLE_DEVICES=0
$APPS anneal --n 1000000 --d 128 --m 1024 --iters 10 --tol 0 --out idx --backend cuda 2>&1 | tail -3
TOTAL=$(nvidia-smi -i 0 --query-gpu=memory.total --format=csv,noheader,nounits)  # MiB
N=$(python3 -c "print(int($TOTAL*1048576*1.08)//256)")
echo "GPU memory $TOTAL MiB; encoding N=$N points x 128 f16 = $(python3 -c "print(round($N*256/1e9,1))") GB"
mkfifo pts.npy
python3 $REPO/.devcarry/encode/stream_npy.py $N 128 > pts.npy &
nvidia-smi -i 0 --query-gpu=memory.used --format=csv,noheader,nounits -lms 250 > gpu_mem.log &
SMI=$!
START=$(date +%s.%N)
$APPS encode idx --npy pts.npy --out codes.npy --chunk 4000000 --backend cuda > enc.log 2>&1 &
PID=$!
( sleep 240; kill $PID 2>/dev/null ) &
HWM=0
while kill -0 $PID 2>/dev/null; do
  h=$(awk '/VmHWM/{print $2}' /proc/$PID/status 2>/dev/null); [ -n "$h" ] && HWM=$h
  sleep 0.5
done
wait $PID; RC=$?
END=$(date +%s.%N)
kill $SMI
tail -4 enc.log
echo "encode rc=$RC wall $(python3 -c "print(round($END-$START,1))") s; host peak RSS (VmHWM) $HWM kB"
echo "gpu memory used: before $(head -1 gpu_mem.log) MiB, peak $(sort -n gpu_mem.log | tail -1) MiB (of $TOTAL)"
ls -la codes.npy
python3 - <<'PY'
import struct
f=open('codes.npy','rb'); head=f.read(10); hl=struct.unpack('<H',head[8:10])[0]; h=f.read(hl).decode(); print(h.strip())
import os; print('bytes', os.path.getsize('codes.npy'))
f.seek(10+hl); import array; a=array.array('I'); a.frombytes(f.read(4*1000000)); print('first 1M codes: max', max(a), 'distinct', len(set(a)))
PY
cp enc.log gpu_mem.log $OUT/ 2>/dev/null
