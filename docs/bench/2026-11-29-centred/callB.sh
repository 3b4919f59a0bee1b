set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export KILN_REQUIRE_GPU=1
for t in assign_tc anneal encode_gpu; do
  echo "== $t"; timeout 240 .gpu/new/$t --test-threads=1 --nocapture > $OUT/test_$t.log 2>&1; echo "rc $?"
  grep -E "^test result|FAILED|panicked|skipped|listed|through the list kernel" $OUT/test_$t.log | grep -E "result|FAIL|panic|skipped|offset|scaled|unit|aniso|near-ties" | head -30
done
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  echo "== $tool"; timeout 200 $SAN --tool $tool --error-exitcode 99 .gpu/new/assign_tc --test-threads=1 tc_is_exact_and_tight > $OUT/san_$tool.log 2>&1; echo "rc $?"; tail -3 $OUT/san_$tool.log
done
bash .gpu/bench.sh "$@" 2>&1 | tee $OUT/bench.log | grep -E "RESULT|ANCHORS" 
grep STATS $OUT/bench.log | cut -c1-400
