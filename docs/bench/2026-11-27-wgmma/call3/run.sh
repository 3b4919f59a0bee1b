#!/usr/bin/env bash
# Device call 3 (issue 28, wgmma): the production kernel is now 3 consumer
# warpgroups x 64 points, 128-anchor tiles, 5 stages (wg_128_3_5). Raw
# accumulator checks and small shapes (short timeout), f16 points, the target
# shapes bit for bit and timed beside more variants, the four sanitizers on a
# small shape, then ncu of the production kernel.
cd "$(dirname "$0")"
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
chmod +x harness
REPS=5 timeout 90 ./harness 10000,80,300 10000,80,300,1 20000,128,1000 1000,32,5000 300,64,70,1 > $OUT/small.log 2>&1; rc=$?
echo "SMALL rc=$rc"; grep -E "RAW|SHAPE|DIFFERENT|RESULT|regs|unresolved" $OUT/small.log | head -60
if [ $rc -ne 0 ]; then tail -20 $OUT/small.log; exit 1; fi
F16=1 SKIP_RAW=1 REPS=3 timeout 90 ./harness 20000,128,1000 100000,768,1024 50000,2048,256 > $OUT/f16.log 2>&1
echo "F16 rc=$?"; grep -E "SHAPE|DIFFERENT|RESULT|TIME round 1|unresolved" $OUT/f16.log
SKIP_RAW=1 REPS=10 timeout 240 ./harness 100000,768,1024 1000000,128,2048 1000000,768,4096 100000,1536,1024 100000,384,1024 10000,128,256 > $OUT/big.log 2>&1
echo "BIG rc=$?"; grep -E "SHAPE|DIFFERENT|RESULT|TIME round 1|unresolved" $OUT/big.log
for tool in memcheck synccheck racecheck initcheck; do
  SKIP_RAW=1 REPS=1 timeout 60 compute-sanitizer --tool $tool --error-exitcode 99 ./harness 3000,96,500,1 > $OUT/san_$tool.txt 2>&1; echo "SANITIZER $tool rc=$?"; tail -2 $OUT/san_$tool.txt
done
if (( SECONDS < 330 )) && command -v ncu >/dev/null; then
  M="--section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"
  for s in 1000000,768,4096 1000000,128,2048; do
    SKIP_RAW=1 REPS=1 timeout 100 ncu --clock-control none -k regex:anneal_assign_wgmma_f32 --launch-count 1 $M ./harness $s > $OUT/ncu_$s.txt 2>&1
    echo "NCU $s rc=$?"; grep -E "Duration|Issue Slots Busy|Warp Cycles Per Issued|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|gmma" $OUT/ncu_$s.txt | head; grep -E "issue_stalled" $OUT/ncu_$s.txt | sort -k3 -g -r | head -6
  done
fi
echo "ELAPSED $SECONDS s"
