#!/usr/bin/env bash
# Device call (issue 28, wgmma): raw accumulator checks and a small shape
# first (short timeout: a pipeline deadlock costs 60 s, not the budget), then
# the three target shapes bit for bit and timed, then ncu of the wgmma kernel
# at 1M x 768 x 4096 while time is left.
cd "$(dirname "$0")"
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
chmod +x harness
REPS=5 timeout 90 ./harness 10000,80,300 10000,80,300,1 20000,128,1000 > $OUT/small.log 2>&1; rc=$?
echo "SMALL rc=$rc"; grep -E "RAW|SHAPE|DIFFERENT|RESULT|regs|TIME round 1|unresolved" $OUT/small.log | head -60
if [ $rc -ne 0 ]; then tail -20 $OUT/small.log; exit 1; fi
SKIP_RAW=1 REPS=10 timeout 240 ./harness 100000,768,1024 1000000,128,2048 1000000,768,4096 100000,1536,1024 > $OUT/big.log 2>&1
echo "BIG rc=$?"; grep -E "SHAPE|DIFFERENT|RESULT|TIME round 1|unresolved" $OUT/big.log
if (( SECONDS < 300 )) && command -v ncu >/dev/null; then
  M="--section SpeedOfLight --section WarpStateStats --section Occupancy --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio"
  SKIP_RAW=1 REPS=1 timeout 120 ncu --clock-control none -k regex:anneal_assign_wgmma_f32 --launch-count 1 $M ./harness 1000000,768,4096 > $OUT/ncu.txt 2>&1
  echo "NCU rc=$?"; grep -E "Duration|Issue Slots Busy|Warp Cycles Per Issued|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy" $OUT/ncu.txt | head; grep -E "issue_stalled" $OUT/ncu.txt | sort -k3 -g -r | head -6
fi
echo "ELAPSED $SECONDS s"
