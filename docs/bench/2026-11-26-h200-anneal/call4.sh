#!/usr/bin/env bash
# Diagnosis: why trim/slim run 3x longer than base at 100K x 4096 x 1024.
cd "$(dirname "$0")"
exec > >(tee $OUT/log.txt) 2>&1
python3 gen.py /tmp/pts 100000,4096 1000000,128 >&2
for v in base trim slim; do
  echo "STATS $v"; KILN_ANNEAL_TC_STATS=1 ./bin-$v/apps anneal --npy /tmp/pts/x_100000_4096.npy --m 1024 --iters 6 --tol 0 --backend cuda 2>&1 | grep -E 'tc:|^cuda' | head -12
done
for v in base trim; do
  echo "NCU-SUMMARY $v 100000,4096,1024"
  timeout 100 ncu --clock-control none --csv --metrics gpu__time_duration.sum ./bin-$v/apps anneal --npy /tmp/pts/x_100000_4096.npy --m 1024 --iters 6 --tol 0 --backend cuda > /tmp/ncu.csv 2>&1
  python3 ncusum.py < /tmp/ncu.csv | head -6
done
