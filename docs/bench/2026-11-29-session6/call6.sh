# Session 6, call 6: w16 (branch wide-lists' build) beside Flash-KMeans and
# the other anchors on the same files, in one call; racecheck over every
# test of w16's assign_tc.
set -u
(cd .gpu/s6 && python3 -c "import tarfile; [tarfile.open(f).extractall() for f in ('w16.tar.xz','w16t.tar.xz')]")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds; A=.gpu/anchors
python3 .gpu/gen.py $D normal:1000000:128 normal:1000000:64 normal:1000000:768 offset:1000000:768 >/dev/null
for s in offset:1000000:768:4096 normal:1000000:768:4096 normal:1000000:128:2048 normal:1000000:64:2048; do
  IFS=: read kind n d m <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for rep in 1 2; do echo "R6 $kind ${n}x${d}x${m} w16 $rep $(.gpu/s6/w16/apps anneal --npy $f --m $m --iters 10 --tol 0 --backend cuda 2>&1 | grep -oE 'iterations [0-9.]+ ms' | head -1)"; done
  PYTHONPATH=$A/flash-kmeans timeout 200 python3 $A/kmeans_anchors.py $n,$d,$m --npy $D/$kind 2>/dev/null | grep "_ms" | tr -d ' \n' | sed "s/^/ANCHORS $kind ${n}x${d}x${m} /"; echo
done 2>&1 | tee $OUT/r6.log
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
echo "== racecheck (every test of assign_tc, one thread)"; KILN_REQUIRE_GPU=1 timeout 170 $CS --tool racecheck .gpu/s6/w16t/t_assign_tc --test-threads 1 > $OUT/racecheck.log 2>&1; echo "rc=$?"
grep -E "RACECHECK SUMMARY|test result" $OUT/racecheck.log
