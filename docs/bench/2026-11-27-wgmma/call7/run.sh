#!/usr/bin/env bash
# Device call 7 (issue 28): the final tree (both kernels also share the
# refinement driver refine_rows): crates/anneal GPU tests, the harness with the
# pre-refactor mma.sync kernels (tco_*) beside, memcheck.
cd "$(dirname "$0")"
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
gunzip -f assign_tc.gz anneal.gz; chmod +x assign_tc anneal harness
export KILN_REQUIRE_GPU=1
for t in assign_tc anneal; do
  timeout 150 ./$t --test-threads=1 > $OUT/test_$t.txt 2>&1; echo "TEST $t rc=$?"; grep -E 'test result|FAILED|panicked|skipped|not run' $OUT/test_$t.txt | head -12
done
unset KILN_REQUIRE_GPU
REPS=3 timeout 60 ./harness 10000,80,300,1 300,64,70,1 > $OUT/small.log 2>&1
echo "SMALL rc=$?"; grep -E "RAW|SHAPE|DIFFERENT|RESULT" $OUT/small.log
SKIP_RAW=1 REPS=10 timeout 150 ./harness 100000,768,1024 1000000,768,4096 > $OUT/big.log 2>&1
echo "BIG rc=$?"; grep -E "SHAPE|DIFFERENT|RESULT|TIME round 1" $OUT/big.log
for tool in memcheck; do
  if (( SECONDS > 330 )); then echo "SANITIZER $tool skipped (time)"; continue; fi
  KILN_REQUIRE_GPU=1 timeout 60 compute-sanitizer --tool $tool --error-exitcode 99 ./assign_tc --test-threads=1 wgmma_kernel tc_matches_reference > $OUT/san_$tool.txt 2>&1; echo "SANITIZER $tool rc=$?"; tail -2 $OUT/san_$tool.txt
done
echo "ELAPSED $SECONDS s"
