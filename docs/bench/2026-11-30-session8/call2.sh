# Session 8, call 2: new (fe8cafd: + one launch for combine/update/finish,
# exact neighbour search for few anchors) against base (4514d81) and new with
# KILN_ANNEAL_FUSE=off, same files, alternating, outputs compared; GPU tests;
# compute-sanitizer on the new kernels' tests.
set -u
tar xJf target/gpu-bundle.tar.xz -C /tmp
(cd .gpu/s8 && python3 -c "import tarfile; tarfile.open('base.tar.xz').extractall()")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds; NEW=/tmp/gpu-bundle/bin/apps; BASE=.gpu/s8/base/apps
python3 .gpu/gen.py $D normal:10000:128 offset:10000:128 embed:10000:128 normal:10000:768 normal:100000:128 normal:1000000:128 >/dev/null
for s in normal:10000:128:256:30 offset:10000:128:256:30 embed:10000:128:256:30 normal:10000:768:256:30 normal:100000:128:1024:30 normal:1000000:128:2048:10; do
  IFS=: read kind n d m it <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for rep in 1 2 3; do for b in BASE NEW OFF; do
    case $b in BASE) B=$BASE; E=;; NEW) B=$NEW; E=;; OFF) B=$NEW; E=KILN_ANNEAL_FUSE=off;; esac
    echo "R $kind ${n}x${d}x${m}x$it $b $rep $(env $E $B anneal --npy $f --m $m --iters $it --tol 0 --backend cuda --out /tmp/o_$b --force 2>&1 | grep -E 'whole run|time:' | grep -oE 'iterations [0-9.]+ ms in [0-9]+ runs?, maintenance [0-9.]+ ms|iterations [0-9.]+ ms\)|energy [0-9.]+' | tr '\n' ' ')"
  done; done
  for b in NEW OFF; do cmp -s /tmp/o_BASE/assignments.npy /tmp/o_$b/assignments.npy && cmp -s /tmp/o_BASE/anchors.npy /tmp/o_$b/anchors.npy && echo "SAME $b $kind ${n}x${d}x${m}" || echo "DIFF $b $kind ${n}x${d}x${m}"; done
done 2>&1 | tee $OUT/runs.log
cd /tmp/gpu-bundle
for t in anneal__anneal anneal__neighbors anneal__assign_tc anneal__kiln_anneal anneal__rank_session anneal__distributed; do
  KILN_REQUIRE_GPU=1 timeout 200 ./bin/$t --nocapture > $OUT/t_$t.log 2>&1; echo "$t rc=$?"; grep -E "^test result|panicked|FAILED" $OUT/t_$t.log | head -5
done
grep -E "identical|same reads|bits" $OUT/t_anneal__anneal.log $OUT/t_anneal__neighbors.log | head -20
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
KILN_REQUIRE_GPU=1 timeout 200 $CS --tool memcheck --error-exitcode 9 ./bin/anneal__anneal --test-threads 1 one_launch > $OUT/san_fused_memcheck.log 2>&1; echo "fused test memcheck rc=$?"; grep -E "ERROR SUMMARY|test result" $OUT/san_fused_memcheck.log | head -3
for tool in racecheck synccheck; do
  timeout 120 $CS --tool $tool --error-exitcode 9 ./bin/apps anneal --npy /tmp/kinds/normal/x_10000_128.npy --m 256 --iters 6 --tol 0 --backend cuda > $OUT/san_run_$tool.log 2>&1; echo "apps anneal 10K $tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|energy" $OUT/san_run_$tool.log | head -3
done
for tool in memcheck racecheck synccheck; do
  KILN_REQUIRE_GPU=1 timeout 100 $CS --tool $tool --error-exitcode 9 ./bin/anneal__neighbors --test-threads 1 > $OUT/san_nb_$tool.log 2>&1; echo "neighbors $tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result" $OUT/san_nb_$tool.log | head -3
done
