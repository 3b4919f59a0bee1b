#!/bin/bash
# One 2-GPU call: the GPU bundle's suite and ranks (KILN_REQUIRE_GPU set by
# run.sh), then `apps encode` of more f16 points than the GPU has memory,
# streamed through a FIFO, with peak device and host memory sampled.
set -u
REPO=$PWD
for f in .gl/*.deb; do dpkg -x "$f" / >/dev/null 2>&1; done; ldconfig
mkdir -p /tmp/b && tar xJf target/gpu-bundle.tar.xz -C /tmp/b
cd /tmp/b/gpu-bundle
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
echo "=== run.sh tests"; date +%s.%N
timeout 300 bash run.sh tests 2>&1 | tail -60 | tee "$OUT/tests.log" | grep -E "passed|FAIL|failed|gpu-bundle:" | tail -40
echo "=== run.sh ranks"; date +%s.%N
timeout 150 bash run.sh ranks 2>&1 | tail -40 | tee "$OUT/ranks.log" | tail -25
echo "=== encode_gpu with the SIMT kernel (KILN_ANNEAL_TC=0)"
KILN_ANNEAL_TC=0 timeout 120 ./bin/anneal__encode_gpu --test-threads=1 2>&1 | grep -E "test |result|skipped" | tail -8
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

echo "=== sanitizers"; date +%s.%N
cd /tmp/b/gpu-bundle
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
echo "memcheck, default options: kernel-trees__byname"
timeout 90 $SAN --tool memcheck --error-exitcode 99 ./bin/kernel-trees__byname --test-threads=1 2>&1 | tail -4; echo "rc=${PIPESTATUS[0]}"
for tool in memcheck synccheck initcheck racecheck; do
  echo "$tool: anneal__encode_gpu"
  timeout 100 $SAN --tool $tool --error-exitcode 99 ./bin/anneal__encode_gpu --test-threads=1 2>&1 | tail -3; echo "rc=${PIPESTATUS[0]}"
done
date +%s.%N
