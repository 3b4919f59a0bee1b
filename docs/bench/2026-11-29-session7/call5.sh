# Session 7, call 5: member lists by scan (anneal_members) for small
# problems, `mb` = 2750d05 + the scan; base = main before this session;
# KILN_ANNEAL_MEMBERS=sort on mb is 2750d05's path. Same files, outputs
# compared; ncu per kernel at 10K; the anneal GPU tests (the new
# sort-against-scan test among them).
set -u
(cd .gpu/s7 && for t in base mb; do python3 -c "import tarfile; tarfile.open('$t.tar.xz').extractall()"; done)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds; MB=.gpu/s7/mb/apps; BASE=.gpu/s7/base/apps
python3 .gpu/gen.py $D normal:10000:128 offset:10000:128 embed:10000:128 normal:30000:128 normal:100000:128 normal:100000:768 >/dev/null
for s in normal:10000:128:256:30 offset:10000:128:256:30 embed:10000:128:256:30 normal:30000:128:256:30 normal:100000:128:1024:30 normal:100000:768:1024:10; do
  IFS=: read kind n d m it <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for rep in 1 2 3; do for b in BASE SORT SCAN; do
    case $b in BASE) B=$BASE; E="";; SORT) B=$MB; E="KILN_ANNEAL_MEMBERS=sort";; SCAN) B=$MB; E="KILN_ANNEAL_MEMBERS=scan";; esac
    echo "R $kind ${n}x${d}x${m}x$it $b $rep $(env $E $B anneal --npy $f --m $m --iters $it --tol 0 --backend cuda --out /tmp/o_$b --force 2>&1 | grep -E 'whole run|time:' | grep -oE 'iterations [0-9.]+ ms in [0-9]+ runs, maintenance [0-9.]+ ms|iterations [0-9.]+ ms\)' | tr '\n' ' ')"
  done; done
  for b in SORT SCAN; do cmp -s /tmp/o_BASE/assignments.npy /tmp/o_$b/assignments.npy && cmp -s /tmp/o_BASE/anchors.npy /tmp/o_$b/anchors.npy && echo "SAME $b $kind ${n}x${d}x${m}" || echo "DIFF $b $kind ${n}x${d}x${m}"; done
done 2>&1 | tee $OUT/runs.log
f=$D/normal/x_10000_128.npy
for by in sort scan; do
  KILN_ANNEAL_MEMBERS=$by ncu --clock-control none --metrics gpu__time_duration.sum --csv $MB anneal --npy $f --m 256 --iters 30 --tol 0 --backend cuda > $OUT/ncu_$by.csv 2>/dev/null; python3 .gpu/prof.py $OUT/ncu_$by.csv $by | head -8
done
KILN_REQUIRE_GPU=1 .gpu/s7/mb/t_anneal --test-threads=1 2>&1 | tail -15
