#!/usr/bin/env bash
# issue 28, session 29 call 2: the tensor-core assignment kernels before (harness-old,
# HEAD's kernels) and after (harness-new) the filtered epilogue: outputs' hash, points listed,
# time of the assignment with its list kernels; sanitizers on the new build.
cd "$(dirname "$0")"
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
chmod +x harness-old harness-new
for v in old new; do
  REPS=3 timeout 90 ./harness-$v 10000,80,300 10000,80,300,1 1000,32,5000 300,64,70,1 3000,4096,200,1 10000,128,256 > $OUT/small_$v.log 2>&1; rc=$?
  echo "SMALL $v rc=$rc"; grep -E "SHAPE|DIFFERENT|RESULT|regs|listed|TIME" $OUT/small_$v.log | head -80
  [ $rc -ne 0 ] && tail -5 $OUT/small_$v.log
done
for mode in points means; do
  if [ $mode = means ]; then export MEANS=1; fi
  for v in old new; do
    REPS=5 timeout 200 ./harness-$v 1000000,128,2048 100000,768,1024 1000000,768,4096 100000,4096,1024 50000,2048,256 100000,384,1024 > $OUT/big_${mode}_$v.log 2>&1
    echo "BIG $mode $v rc=$?"; grep -E "SHAPE|DIFFERENT|RESULT|TIME|listed" $OUT/big_${mode}_$v.log
  done
done
unset MEANS
for tool in memcheck racecheck synccheck initcheck; do
  REPS=1 timeout 90 compute-sanitizer --tool $tool --error-exitcode 99 ./harness-new 3000,96,500,1 1000,1100,300 2000,128,256 > $OUT/san_$tool.txt 2>&1; echo "SANITIZER $tool rc=$?"; tail -2 $OUT/san_$tool.txt
done
echo "ELAPSED $SECONDS s"
