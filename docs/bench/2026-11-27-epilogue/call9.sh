#!/usr/bin/env bash
# issue 28, session 29 call 9: where one anneal_assign_wgmma_f32 launch at 10K x 128 x 256 spends
# its time: ncu's warp-state sampling per SASS instruction (source page).
cd "$(dirname "$0")"
exec > >(tee $OUT/log.txt) 2>&1
tar xJf ../../target/gpu-bundle.tar.xz -C /tmp && mkdir -p bin-new && cp /tmp/gpu-bundle/bin/apps bin-new/apps
python3 gen.py /tmp/pts 10000,128 1000000,128
for s in 10000,128,256 1000000,128,2048; do IFS=, read n d k <<<"$s"
ncu --clock-control none -k regex:assign_wgmma_f32 --launch-skip 3 --launch-count 1 --section WarpStateStats --section SourceCounters --section LaunchStats --section Occupancy --page source --print-source sass --csv ./bin-new/apps anneal --npy /tmp/pts/x_${n}_${d}.npy --m $k --iters 6 --tol 0 --backend cuda > $OUT/src_$n.csv 2> $OUT/src_$n.err
echo "NCU $s rc=$? $(wc -l < $OUT/src_$n.csv) lines"
head -3 $OUT/src_$n.csv | cut -c1-600
done
echo "ELAPSED $SECONDS s"
