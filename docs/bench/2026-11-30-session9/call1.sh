# Session 9, call 1: the assignment tile at small n. The same release apps
# (main at 41b24ef's kernels) under KILN_ANNEAL_TC_TILE=auto (the wgmma
# kernel: 192 points a block), 64 and 128 (the mma.sync tiles: 128 points
# a block), three runs each, alternating, outputs compared against auto;
# then kmeans_anchors.py on the same 10K x 128 points.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds; A=.gpu/apps
python3 .gpu/gen.py $D normal:10000:128 offset:10000:128 embed:10000:128 normal:10000:768 normal:30000:128 normal:100000:128 >/dev/null
for s in normal:10000:128:256:30 offset:10000:128:256:30 embed:10000:128:256:30 normal:10000:768:256:30 normal:30000:128:256:30 normal:100000:128:1024:30; do
  IFS=: read kind n d m it <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for rep in 1 2 3; do for t in auto 64 128; do
    echo "R $kind ${n}x${d}x${m}x$it $t $rep $(KILN_ANNEAL_TC_TILE=$t $A anneal --npy $f --m $m --iters $it --tol 0 --backend cuda --out /tmp/o_$t --force 2>&1 | grep -E 'whole run|time:' | grep -oE 'iterations [0-9.]+ ms in [0-9]+ runs?, maintenance [0-9.]+ ms|iterations [0-9.]+ ms\)' | tr '\n' ' ')"
  done; done
  for t in 64 128; do cmp -s /tmp/o_auto/assignments.npy /tmp/o_$t/assignments.npy && cmp -s /tmp/o_auto/anchors.npy /tmp/o_$t/anchors.npy && echo "SAME $t $kind ${n}x${d}x${m}" || echo "DIFF $t $kind ${n}x${d}x${m}"; done
done 2>&1 | tee $OUT/runs.log
cd .gpu/anchors && for kind in normal offset; do echo "ANCHORS $kind"; PYTHONPATH=flash-kmeans timeout 200 python3 kmeans_anchors.py 10000,128,256,30 30000,128,256,30 --npy $D/$kind 2>&1 | tail -12; done | tee $OUT/anchors.log
