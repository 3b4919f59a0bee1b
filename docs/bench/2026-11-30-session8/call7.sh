# Session 8, call 7: new (d337530: + the wgmma prologue per warpgroup, the
# list kernel's finish in its last block) against cb8 (cb86f25) and base
# (4514d81), same files, alternating, outputs compared; the GPU tests that
# touch the changed kernels, and compute-sanitizer on them.
set -u
tar xJf target/gpu-bundle.tar.xz -C /tmp
(cd .gpu/s8 && for t in base cb8; do python3 -c "import tarfile; tarfile.open('$t.tar.xz').extractall()"; done)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds; NEW=/tmp/gpu-bundle/bin/apps; BASE=.gpu/s8/base/apps; CB8=.gpu/s8/cb8/apps
python3 .gpu/gen.py $D normal:10000:128 offset:10000:128 embed:10000:128 normal:10000:768 normal:100000:128 normal:1000000:128 offset:1000000:768 >/dev/null
for s in normal:10000:128:256:30 offset:10000:128:256:30 embed:10000:128:256:30 normal:10000:768:256:30 normal:100000:128:1024:30 normal:1000000:128:2048:10 offset:1000000:768:4096:10; do
  IFS=: read kind n d m it <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for rep in 1 2 3; do for b in BASE CB8 NEW; do eval B=\$$b
    echo "R $kind ${n}x${d}x${m}x$it $b $rep $($B anneal --npy $f --m $m --iters $it --tol 0 --backend cuda --out /tmp/o_$b --force 2>&1 | grep -E 'whole run|time:' | grep -oE 'iterations [0-9.]+ ms in [0-9]+ runs?, maintenance [0-9.]+ ms|iterations [0-9.]+ ms\)' | tr '\n' ' ')"
  done; done
  for b in CB8 NEW; do cmp -s /tmp/o_BASE/assignments.npy /tmp/o_$b/assignments.npy && cmp -s /tmp/o_BASE/anchors.npy /tmp/o_$b/anchors.npy && echo "SAME $b $kind ${n}x${d}x${m}" || echo "DIFF $b $kind ${n}x${d}x${m}"; done
done 2>&1 | tee $OUT/runs.log
KILN_ANNEAL_TC_STATS=1 $NEW anneal --npy $D/offset/x_1000000_768.npy --m 4096 --iters 10 --tol 0 --backend cuda 2>&1 | grep "tc:" | tr '\n' ' ' | sed 's/^/LISTED /'; echo
cd /tmp/gpu-bundle
for t in anneal__assign_tc anneal__anneal anneal__neighbors anneal__encode_gpu anneal__kiln_anneal anneal__distributed; do
  KILN_REQUIRE_GPU=1 timeout 200 ./bin/$t > $OUT/t_$t.log 2>&1; echo "$t rc=$?"; grep -E "^test result|panicked|FAILED" $OUT/t_$t.log | head -4
done
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
KILN_REQUIRE_GPU=1 timeout 150 $CS --tool memcheck --error-exitcode 9 ./bin/anneal__assign_tc --test-threads 1 > $OUT/san_tc_memcheck.log 2>&1; echo "assign_tc memcheck rc=$?"; grep -E "ERROR SUMMARY|test result" $OUT/san_tc_memcheck.log | head -3
for t in list_kernel_alone wgmma_kernel_matches; do for tool in racecheck synccheck; do
  KILN_REQUIRE_GPU=1 timeout 120 $CS --tool $tool --error-exitcode 9 ./bin/anneal__assign_tc --test-threads 1 $t > $OUT/san_${t}_$tool.log 2>&1; echo "$t $tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result" $OUT/san_${t}_$tool.log | head -3
done; done
