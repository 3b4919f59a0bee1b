# Session 6, call 2 (branch refine-apart): the wgmma kernel writes each
# point's candidate list to global memory and a kernel of its own
# (anneal_refine_lists_*, one warp per point) refines them. base = main's
# apps (b254bec's kernels); new = this branch. Iterations' time, same
# assignments and anchors, list shares, Flash on the same files; the new
# build's GPU tests and sanitizers.
set -u
(cd .gpu && python3 -c "import tarfile; [tarfile.open(f).extractall() for f in ('pp.tar.xz','s6/ra.tar.xz')]")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
BASE=.gpu/pp/base/apps; NEW=.gpu/ra/apps; A=.gpu/anchors; D=/tmp/kinds
python3 .gpu/gen.py $D normal:1000000:128 offset:1000000:128 normal:1000000:64 embed:200000:128 normal:10000:128 normal:100000:768 normal:1000000:768 offset:1000000:768 >/dev/null
for s in normal:1000000:128:2048 offset:1000000:128:2048 normal:1000000:64:2048 embed:200000:128:16384 normal:10000:128:256 normal:100000:768:1024 normal:1000000:768:4096 offset:1000000:768:4096; do
  IFS=: read kind n d m <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for rep in 1 2; do for b in BASE NEW; do eval B=\$$b
    echo "RA $kind ${n}x${d}x${m} $b $rep $($B anneal --npy $f --m $m --iters 10 --tol 0 --backend cuda --out /tmp/o_$b --force 2>&1 | grep -oE 'iterations [0-9.]+ ms' | head -1)"
  done; done
  cmp -s /tmp/o_BASE/assignments.npy /tmp/o_NEW/assignments.npy && cmp -s /tmp/o_BASE/anchors.npy /tmp/o_NEW/anchors.npy && echo "SAME $kind ${n}x${d}x${m}" || echo "DIFF $kind ${n}x${d}x${m}"
  echo "STATS $kind ${n}x${d}x${m} NEW: $(KILN_ANNEAL_TC_STATS=1 $NEW anneal --npy $f --m $m --iters 10 --tol 0 --backend cuda 2>&1 | grep -oE '\([0-9.]+%\)' | tr '\n' ' ')"
done 2>&1 | tee $OUT/ra.log
for s in normal:1000000:128:2048 normal:1000000:64:2048 normal:1000000:768:4096; do
  IFS=: read kind n d m <<<"$s"
  PYTHONPATH=$A/flash-kmeans timeout 200 python3 $A/kmeans_anchors.py $n,$d,$m --npy $D/$kind 2>/dev/null | grep "_ms" | tr -d ' \n' | sed "s/^/ANCHORS $kind ${n}x${d}x${m} /"; echo
done 2>&1 | tee $OUT/anchors.log
for t in .gpu/ra/t_*; do echo "== $t"; KILN_REQUIRE_GPU=1 timeout 100 $t 2>&1 | grep -E "^test result|panicked|FAILED" -A2 | head -8; done 2>&1 | tee $OUT/tests.log
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck synccheck racecheck; do echo "== sanitizer $tool"; KILN_REQUIRE_GPU=1 timeout 120 $CS --tool $tool .gpu/ra/t_assign_tc 2>&1 | grep -E "ERROR SUMMARY|test result|RACECHECK SUMMARY" ; done 2>&1 | tee $OUT/sanitizer.log
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
f=$D/normal/x_1000000_128.npy
timeout 150 $NCU -k regex:"assign_wgmma|refine_lists" --launch-skip 2 --launch-count 2 --section SpeedOfLight --section Occupancy $NEW anneal --npy $f --m 2048 --iters 3 --tol 0 --backend cuda 2>&1 | grep -E "anneal_|Duration|Achieved Occupancy|Registers" | tee $OUT/ncu.log
