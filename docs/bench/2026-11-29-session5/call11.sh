# Session 5, call 11 (branch pingpong): the narrow-d wgmma path multiplying
# each anchor tile in parts (p2: halves, p4: quarters), each part's
# epilogue under the next parts' products; base = main's apps (b254bec).
# Iterations' time, same assignments as base; p2's GPU tests; sanitizer on
# assign_tc.
(cd .gpu && python3 -c "import tarfile; tarfile.open('pp.tar.xz').extractall()")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds; python3 .gpu/gen.py $D normal:1000000:128 offset:1000000:128 normal:1000000:64 embed:200000:128 normal:10000:128 normal:100000:768 >/dev/null
for s in normal:1000000:128:2048 offset:1000000:128:2048 normal:1000000:64:2048 embed:200000:128:16384 normal:10000:128:256 normal:100000:768:1024; do
  IFS=: read kind n d m <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for rep in 1 2; do for b in base p2 p4; do
    echo "PP $kind ${n}x${d}x${m} $b $rep $(.gpu/pp/$b/apps anneal --npy $f --m $m --iters 10 --tol 0 --backend cuda --out /tmp/o_$b --force 2>&1 | grep -oE 'iterations [0-9.]+ ms' | head -1)"
  done; done
  for b in p2 p4; do cmp -s /tmp/o_base/assignments.npy /tmp/o_$b/assignments.npy && cmp -s /tmp/o_base/anchors.npy /tmp/o_$b/anchors.npy && echo "SAME $kind ${n}x${d}x${m} $b" || echo "DIFF $kind ${n}x${d}x${m} $b"; done
  for b in base p2; do echo "STATS $kind ${n}x${d}x${m} $b: $(KILN_ANNEAL_TC_STATS=1 .gpu/pp/$b/apps anneal --npy $f --m $m --iters 10 --tol 0 --backend cuda 2>&1 | grep -oE '\([0-9.]+%\)' | tr '\n' ' ')"; done
done 2>&1 | tee $OUT/pp.log
for t in .gpu/pp/p2/t_*; do echo "== $t"; KILN_REQUIRE_GPU=1 timeout 100 $t 2>&1 | grep -E "^test result|panicked|FAILED" -A2 | head -8; done 2>&1 | tee $OUT/tests.log
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck synccheck; do echo "== sanitizer $tool"; KILN_REQUIRE_GPU=1 timeout 100 $CS --tool $tool .gpu/pp/p2/t_assign_tc 2>&1 | grep -E "ERROR SUMMARY|test result|RACECHECK SUMMARY" ; done 2>&1 | tee $OUT/sanitizer.log
