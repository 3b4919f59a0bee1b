# Session 8, call 5: new (cb86f25: + owners table and pipelined reduce, 16
# points a thread in anneal_members) against fe8 (fe8cafd) and base
# (4514d81), same files, alternating, outputs compared; ncu per kernel at 10K;
# the anneal tests; the quick k-means bench beside the anchors.
set -u
tar xJf target/gpu-bundle.tar.xz -C /tmp
cp -r .gpu/anchors/* /tmp/gpu-bundle/
(cd .gpu/s8 && for t in base fe8; do python3 -c "import tarfile; tarfile.open('$t.tar.xz').extractall()"; done)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds; NEW=/tmp/gpu-bundle/bin/apps; BASE=.gpu/s8/base/apps; FE8=.gpu/s8/fe8/apps
python3 .gpu/gen.py $D normal:10000:128 offset:10000:128 embed:10000:128 normal:10000:768 normal:100000:128 normal:1000000:128 >/dev/null
for s in normal:10000:128:256:30 offset:10000:128:256:30 embed:10000:128:256:30 normal:10000:768:256:30 normal:100000:128:1024:30 normal:1000000:128:2048:10; do
  IFS=: read kind n d m it <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for rep in 1 2 3; do for b in BASE FE8 NEW; do eval B=\$$b
    echo "R $kind ${n}x${d}x${m}x$it $b $rep $($B anneal --npy $f --m $m --iters $it --tol 0 --backend cuda --out /tmp/o_$b --force 2>&1 | grep -E 'whole run|time:' | grep -oE 'iterations [0-9.]+ ms in [0-9]+ runs?, maintenance [0-9.]+ ms|iterations [0-9.]+ ms\)' | tr '\n' ' ')"
  done; done
  for b in FE8 NEW; do cmp -s /tmp/o_BASE/assignments.npy /tmp/o_$b/assignments.npy && cmp -s /tmp/o_BASE/anchors.npy /tmp/o_$b/anchors.npy && echo "SAME $b $kind ${n}x${d}x${m}" || echo "DIFF $b $kind ${n}x${d}x${m}"; done
done 2>&1 | tee $OUT/runs.log
f=$D/normal/x_10000_128.npy
timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum --csv $NEW anneal --npy $f --m 256 --iters 30 --tol 0 --backend cuda > $OUT/ncu.csv 2>/dev/null; echo "ncu rc $?"
python3 .gpu/prof.py $OUT/ncu.csv new10k 2>&1 | tee $OUT/prof.log
cd /tmp/gpu-bundle
for t in anneal__anneal anneal__kiln_anneal; do
  KILN_REQUIRE_GPU=1 timeout 200 ./bin/$t --nocapture > $OUT/t_$t.log 2>&1; echo "$t rc=$?"; grep -E "^test result|panicked|FAILED" $OUT/t_$t.log | head -5
done
timeout 400 ./bin/xtask bench --apps bin/apps --kmeans-anchors kmeans_anchors.py --quick --kinds normal,offset,embedding --out $OUT/bench > $OUT/bench.log 2>&1; echo "bench rc $?"
tail -3 $OUT/bench.log; sed -n 1,14p $OUT/bench/kmeans.md 2>/dev/null
