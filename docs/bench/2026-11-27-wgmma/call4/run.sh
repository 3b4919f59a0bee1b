#!/usr/bin/env bash
# Device call 4 (issue 28, wgmma integrated): crates/anneal's GPU tests with
# KILN_REQUIRE_GPU=1 (assign_tc: every case with mma.sync 128, 64 and the
# wgmma kernel; anneal: the engine, now on wgmma by default on cc 9.0), the
# harness on the moved-code kernel, then compute-sanitizer on the wgmma test.
cd "$(dirname "$0")"
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
gunzip -f assign_tc.gz anneal.gz; chmod +x assign_tc anneal harness
export KILN_REQUIRE_GPU=1
for t in assign_tc anneal; do
  timeout 150 ./$t --test-threads=1 > $OUT/test_$t.txt 2>&1; echo "TEST $t rc=$?"; grep -E 'test result|FAILED|panicked|skipped|not run' $OUT/test_$t.txt | head -12
done
REPS=5 timeout 90 ./harness 10000,80,300,1 100000,768,1024 1000000,768,4096 > $OUT/harness.log 2>&1
echo "HARNESS rc=$?"; grep -E "RAW|SHAPE|DIFFERENT|RESULT|TIME round 1" $OUT/harness.log
for tool in memcheck racecheck synccheck initcheck; do
  if (( SECONDS > 330 )); then echo "SANITIZER $tool skipped (time)"; continue; fi
  timeout 45 compute-sanitizer --tool $tool --error-exitcode 99 ./assign_tc --test-threads=1 wgmma_kernel_matches_reference_on_hopper > $OUT/san_$tool.txt 2>&1; echo "SANITIZER $tool rc=$?"; tail -2 $OUT/san_$tool.txt
done
echo "ELAPSED $SECONDS s"
