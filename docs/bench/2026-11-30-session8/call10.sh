# Session 8, call 10: the exact neighbour search past 2^26: `cur` (dff374b,
# m^2 d <= 2^26) against `x31` (the same with 2^31), same files, alternating,
# outputs compared, plus ncu's duration of each search launch.
set -u
(cd .gpu/s8 && for t in cur x31; do python3 -c "import tarfile; tarfile.open('$t.tar.xz').extractall()"; done)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds; CUR=.gpu/s8/cur/apps; X31=.gpu/s8/x31/apps
python3 .gpu/gen.py $D normal:100000:128 normal:100000:384 normal:100000:768 normal:1000000:128 >/dev/null
for s in normal:100000:128:1024:30 normal:100000:384:1024:30 normal:100000:768:1024:30 normal:1000000:128:2048:10; do
  IFS=: read kind n d m it <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for rep in 1 2 3; do for b in CUR X31; do eval B=\$$b
    echo "R $kind ${n}x${d}x${m}x$it $b $rep $($B anneal --npy $f --m $m --iters $it --tol 0 --backend cuda --out /tmp/o_$b --force 2>&1 | grep -E 'time:' | grep -oE 'iterations [0-9.]+ ms in [0-9]+ runs?, maintenance [0-9.]+ ms in [0-9]+ pass(es)?' | tr '\n' ' ')"
  done; done
  cmp -s /tmp/o_CUR/assignments.npy /tmp/o_X31/assignments.npy && cmp -s /tmp/o_CUR/anchors.npy /tmp/o_X31/anchors.npy && echo "SAME $kind ${n}x${d}x${m}" || echo "DIFF $kind ${n}x${d}x${m}"
done 2>&1 | tee $OUT/runs.log
for s in 100000:128:1024 100000:768:1024 1000000:128:2048; do IFS=: read n d m <<<"$s"; for b in CUR X31; do eval B=\$$b
  timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum --csv $B anneal --npy $D/normal/x_${n}_${d}.npy --m $m --iters 10 --tol 0 --backend cuda > $OUT/ncu_${b}_${n}_${d}.csv 2>/dev/null
  python3 .gpu/prof.py $OUT/ncu_${b}_${n}_${d}.csv "$b ${n}x${d}x${m}" | head -14 | grep -E "launches|neighbors|assign_wgmma|list|to_half|column|absmax|refine"
done; done
