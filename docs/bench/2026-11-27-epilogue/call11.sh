#!/usr/bin/env bash
# issue 28, session 29 call 11: compute-sanitizer on this session's changed kernels (the
# refinement's loads, anneal_reduce's member rows in shared memory), from the bundle's tests.
cd "$(dirname "$0")"
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
tar xJf ../../target/gpu-bundle.tar.xz -C /tmp && cd /tmp/gpu-bundle
for t in memcheck racecheck initcheck synccheck; do
  timeout 140 compute-sanitizer --tool $t --error-exitcode 99 ./bin/anneal__anneal gpu_matches_cpu_on_awkward --test-threads=1 > $OUT/san_awkward_$t.txt 2>&1; echo "SAN awkward $t rc=$? $(grep -E 'test result|SUMMARY' $OUT/san_awkward_$t.txt | tr '\n' ' ')"
done
for t in memcheck racecheck synccheck; do
  timeout 140 compute-sanitizer --tool $t --error-exitcode 99 ./bin/anneal__assign_tc chunked_wgmma --test-threads=1 > $OUT/san_chunked_$t.txt 2>&1; echo "SAN chunked $t rc=$? $(grep -E 'test result|SUMMARY' $OUT/san_chunked_$t.txt | tr '\n' ' ')"
done
echo "ELAPSED $SECONDS s"
