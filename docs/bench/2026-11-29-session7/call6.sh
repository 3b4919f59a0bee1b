# Session 7, call 6: the bundle of this tree (`new`: aa403f4 + one wait per
# read-back and best cleared by list_finish) against `mb` (aa403f4) and
# `base` (main before the session), same files, outputs compared; the GPU
# suite; compute-sanitizer on gpu-core__local and anneal__assign_tc.
set -u
tar xJf target/gpu-bundle.tar.xz -C /tmp
(cd .gpu/s7 && for t in base mb; do python3 -c "import tarfile; tarfile.open('$t.tar.xz').extractall()"; done)
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds; NEW=/tmp/gpu-bundle/bin/apps; MB=.gpu/s7/mb/apps; BASE=.gpu/s7/base/apps
python3 .gpu/gen.py $D normal:10000:128 offset:10000:128 embed:10000:128 normal:1000000:128 offset:1000000:768 >/dev/null
for s in normal:10000:128:256:30 offset:10000:128:256:30 embed:10000:128:256:30 normal:1000000:128:2048:10 offset:1000000:768:4096:10; do
  IFS=: read kind n d m it <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for rep in 1 2 3; do for b in BASE MB NEW; do eval B=\$$b
    echo "R $kind ${n}x${d}x${m}x$it $b $rep $($B anneal --npy $f --m $m --iters $it --tol 0 --backend cuda --out /tmp/o_$b --force 2>&1 | grep -E 'whole run|time:' | grep -oE 'iterations [0-9.]+ ms in [0-9]+ runs, maintenance [0-9.]+ ms|iterations [0-9.]+ ms\)' | tr '\n' ' ')"
  done; done
  for b in MB NEW; do cmp -s /tmp/o_BASE/assignments.npy /tmp/o_$b/assignments.npy && cmp -s /tmp/o_BASE/anchors.npy /tmp/o_$b/anchors.npy && echo "SAME $b $kind ${n}x${d}x${m}" || echo "DIFF $b $kind ${n}x${d}x${m}"; done
done 2>&1 | tee $OUT/runs.log
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
cd /tmp/gpu-bundle
for tool in memcheck racecheck synccheck; do
  KILN_REQUIRE_GPU=1 timeout 100 $CS --tool $tool --error-exitcode 9 ./bin/gpu-core__local --test-threads 1 > $OUT/san_local_$tool.log 2>&1; echo "local $tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result" $OUT/san_local_$tool.log | head -3
done
KILN_REQUIRE_GPU=1 timeout 120 $CS --tool memcheck --error-exitcode 9 ./bin/anneal__assign_tc --test-threads 1 > $OUT/san_tc_memcheck.log 2>&1; echo "assign_tc memcheck rc=$?"; grep -E "ERROR SUMMARY|test result" $OUT/san_tc_memcheck.log | head -3
KILN_REQUIRE_GPU=1 timeout 120 $CS --tool memcheck --error-exitcode 9 ./bin/anneal__anneal --test-threads 1 member_lists > $OUT/san_anneal_memcheck.log 2>&1; echo "anneal member_lists memcheck rc=$?"; grep -E "ERROR SUMMARY|test result" $OUT/san_anneal_memcheck.log | head -3
timeout 280 bash run.sh tests > $OUT/suite.log 2>&1; echo "suite rc $?"; grep -E "^<== |gpu-bundle:" $OUT/suite.log | grep -v ": pass" | tail -20; tail -1 $OUT/suite.log
