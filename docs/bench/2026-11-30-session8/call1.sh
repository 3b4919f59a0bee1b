# Session 8, call 1: new (e4ef861: reduce batches + maintenance reads with the run)
# against base (4514d81), same files, alternating, outputs compared; then the
# anneal GPU tests of new.
set -u
tar xJf target/gpu-bundle.tar.xz -C /tmp
(cd .gpu/s8 && python3 -c "import tarfile; tarfile.open('base.tar.xz').extractall()")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds; NEW=/tmp/gpu-bundle/bin/apps; BASE=.gpu/s8/base/apps
python3 .gpu/gen.py $D normal:10000:128 offset:10000:128 embed:10000:128 normal:100000:128 normal:1000000:128 >/dev/null
for s in normal:10000:128:256:30 offset:10000:128:256:30 embed:10000:128:256:30 normal:100000:128:1024:30 normal:1000000:128:2048:10; do
  IFS=: read kind n d m it <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for rep in 1 2 3; do for b in BASE NEW; do eval B=\$$b
    echo "R $kind ${n}x${d}x${m}x$it $b $rep $($B anneal --npy $f --m $m --iters $it --tol 0 --backend cuda --out /tmp/o_$b --force 2>&1 | grep -E 'whole run|time:' | grep -oE 'iterations [0-9.]+ ms in [0-9]+ runs?, maintenance [0-9.]+ ms in [0-9]+ pass(es)? \(reading [0-9.]+ ms|iterations [0-9.]+ ms\)' | tr '\n' ' ')"
  done; done
  cmp -s /tmp/o_BASE/assignments.npy /tmp/o_NEW/assignments.npy && cmp -s /tmp/o_BASE/anchors.npy /tmp/o_NEW/anchors.npy && echo "SAME $kind ${n}x${d}x${m}" || echo "DIFF $kind ${n}x${d}x${m}"
done 2>&1 | tee $OUT/runs.log
cd /tmp/gpu-bundle
for t in anneal__anneal anneal__kiln_anneal anneal__rank_session; do
  KILN_REQUIRE_GPU=1 timeout 200 ./bin/$t > $OUT/t_$t.log 2>&1; echo "$t rc=$?"; grep -E "^test result|panicked|FAILED" $OUT/t_$t.log | head -5
done
grep -E "etas|steps, the same" $OUT/t_anneal__anneal.log | head
