#!/usr/bin/env bash
# GPU suite + memcheck of the launches (typed and by name, API reports on) on the final bundle.
cd /tmp && rm -rf gpu-bundle && tar xJf $OLDPWD/target/gpu-bundle.tar.xz && cd gpu-bundle
nvidia-smi --query-gpu=name,driver_version --format=csv | tee $OUT/gpus.txt
timeout 400 bash run.sh tests > $OUT/tests.log 2>&1; echo "run.sh tests rc=$?"
grep -E "^(PASS|FAIL|ok|FAILED)|passed|failed" $OUT/tests.log | tail -60
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for t in candle-patterns__by_name kernel-trees__byname; do
  [[ -x bin/$t ]] || { echo "MISSING bin/$t"; continue; }
  timeout 120 $SAN --tool memcheck --error-exitcode 99 ./bin/$t --test-threads=1 > $OUT/memcheck_$t.log 2>&1; echo "memcheck default options $t rc=$?"; tail -3 $OUT/memcheck_$t.log
done
