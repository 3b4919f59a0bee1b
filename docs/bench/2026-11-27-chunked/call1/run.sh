#!/usr/bin/env bash
# Device call 1 (issue 28, the chunked wgmma entry points for wide d).
cd "$(dirname "$0")"
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
chmod +x harness
REPS=3 timeout 60 ./harness 10000,80,300 10000,80,300,1 1000,32,5000 300,64,70,1 3000,4096,200,1 > $OUT/small.log 2>&1; rc=$?
echo "SMALL rc=$rc"; grep -E "SHAPE|DIFFERENT|RESULT|regs|listed" $OUT/small.log | head -60
if [ $rc -ne 0 ]; then tail -20 $OUT/small.log; exit 1; fi
for mode in points means; do
  if [ $mode = means ]; then export MEANS=1; fi
  REPS=5 timeout 200 ./harness 100000,4096,1024 50000,2048,256 100000,1536,1024 100000,768,1024 1000000,768,4096 1000000,128,2048 > $OUT/big_$mode.log 2>&1
  echo "BIG $mode rc=$?"; grep -E "SHAPE|DIFFERENT|RESULT|TIME|listed" $OUT/big_$mode.log
done
unset MEANS
for tool in memcheck racecheck synccheck initcheck; do
  REPS=1 timeout 60 compute-sanitizer --tool $tool --error-exitcode 99 ./harness 3000,96,500,1 1000,1100,300 > $OUT/san_$tool.txt 2>&1; echo "SANITIZER $tool rc=$?"; tail -2 $OUT/san_$tool.txt
done
echo "ELAPSED $SECONDS s"
