#!/usr/bin/env bash
# compute-sanitizer's four tools on the new kernels: candle-patterns (typed and by name, moe), the wgmma path.
repo=$PWD; cd /tmp && rm -rf gpu-bundle && tar xJf $repo/target/gpu-bundle.tar.xz && cd gpu-bundle
nvidia-smi --query-gpu=name,driver_version --format=csv
export KILN_REQUIRE_GPU=1
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for t in candle-patterns__by_name candle-patterns__moe anneal__assign_tc; do
  for tool in memcheck racecheck initcheck synccheck; do
    timeout 200 $SAN --tool $tool --error-exitcode 99 ./bin/$t --test-threads=1 > $OUT/${tool}_$t.log 2>&1; rc=$?
    echo "$tool $t rc=$rc: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test result' $OUT/${tool}_$t.log | tr '\n' ' ')"
  done
done
