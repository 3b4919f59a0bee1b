# Session 9, call 2: the build of 9815156 (arrived_last shared by the fused
# combine-update and the list kernel's finish; ReadBack::read as start +
# take): the GPU tests that touch them, compute-sanitizer on the two
# kernels, and the new apps against 41b24ef's (.gpu/apps) on the same
# files, alternating, outputs compared.
set -u
tar xJf target/gpu-bundle.tar.xz -C /tmp
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds; NEW=/tmp/gpu-bundle/bin/apps; OLD=.gpu/apps
python3 .gpu/gen.py $D normal:10000:128 offset:10000:128 normal:100000:128 >/dev/null
for s in normal:10000:128:256:30 offset:10000:128:256:30 normal:100000:128:1024:30; do
  IFS=: read kind n d m it <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for rep in 1 2 3; do for b in OLD NEW; do eval B=\$$b
    echo "R $kind ${n}x${d}x${m}x$it $b $rep $($B anneal --npy $f --m $m --iters $it --tol 0 --backend cuda --out /tmp/o_$b --force 2>&1 | grep -E 'whole run|time:' | grep -oE 'iterations [0-9.]+ ms in [0-9]+ runs?, maintenance [0-9.]+ ms|iterations [0-9.]+ ms\)' | tr '\n' ' ')"
  done; done
  cmp -s /tmp/o_OLD/assignments.npy /tmp/o_NEW/assignments.npy && cmp -s /tmp/o_OLD/anchors.npy /tmp/o_NEW/anchors.npy && echo "SAME $kind ${n}x${d}x${m}" || echo "DIFF $kind ${n}x${d}x${m}"
done 2>&1 | tee $OUT/runs.log
cd /tmp/gpu-bundle
for t in anneal__assign_tc anneal__anneal anneal__neighbors anneal__kiln_anneal anneal__distributed anneal__encode_gpu; do
  KILN_REQUIRE_GPU=1 timeout 120 ./bin/$t > $OUT/t_$t.log 2>&1; echo "$t rc=$?"; grep -E "^test result|panicked|FAILED" $OUT/t_$t.log | head -4
done
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for spec in assign_tc:list_kernel_alone anneal:one_launch_for_combine_update; do IFS=: read bin t <<<"$spec"
  for tool in racecheck synccheck memcheck; do
    KILN_REQUIRE_GPU=1 timeout 90 $CS --tool $tool --error-exitcode 9 ./bin/anneal__$bin --test-threads 1 $t > $OUT/san_${t}_$tool.log 2>&1; echo "$t $tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result" $OUT/san_${t}_$tool.log | head -3
  done
done
