# Session 6, call 5 (branch wide-lists): the wgmma kernel's candidate lists
# hold up to 16 entries while the tiles go by, pruned by the final bound
# to the 8 the refinement takes (w16: 16 entries, 4 stages); w8 is the
# same code with 8 entries (4 stages: what the stages alone cost); fin is
# main (8 entries, 5 stages). Iterations' time, same assignments and
# anchors, list shares; w16's GPU tests (t_* of w16t; w16t's apps is w8's).
set -u
(cd .gpu/s6 && python3 -c "import tarfile; [tarfile.open(f).extractall() for f in ('fin.tar.xz','w8.tar.xz','w16.tar.xz','w16t.tar.xz')]")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds
python3 .gpu/gen.py $D normal:1000000:128 normal:1000000:64 embed:200000:128 normal:100000:768 normal:1000000:768 offset:1000000:768 >/dev/null
for s in offset:1000000:768:4096 normal:1000000:128:2048 normal:1000000:64:2048 embed:200000:128:16384 normal:100000:768:1024 normal:1000000:768:4096; do
  IFS=: read kind n d m <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for rep in 1 2; do for b in fin w8 w16; do
    echo "R5 $kind ${n}x${d}x${m} $b $rep $(.gpu/s6/$b/apps anneal --npy $f --m $m --iters 10 --tol 0 --backend cuda --out /tmp/o_$b --force 2>&1 | grep -oE 'iterations [0-9.]+ ms' | head -1)"
  done; done
  for b in w8 w16; do cmp -s /tmp/o_fin/assignments.npy /tmp/o_$b/assignments.npy && cmp -s /tmp/o_fin/anchors.npy /tmp/o_$b/anchors.npy && echo "SAME $kind ${n}x${d}x${m} $b" || echo "DIFF $kind ${n}x${d}x${m} $b"; done
  echo "STATS $kind ${n}x${d}x${m} w16: $(KILN_ANNEAL_TC_STATS=1 .gpu/s6/w16/apps anneal --npy $f --m $m --iters 10 --tol 0 --backend cuda 2>&1 | grep -oE '\([0-9.]+%\)' | tr '\n' ' ')"
done 2>&1 | tee $OUT/r5.log
for t in .gpu/s6/w16t/t_*; do echo "== $t"; KILN_REQUIRE_GPU=1 timeout 100 $t 2>&1 | grep -E "^test result|panicked|FAILED" -A2 | head -8; done 2>&1 | tee $OUT/tests.log
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck synccheck; do echo "== sanitizer $tool"; KILN_REQUIRE_GPU=1 timeout 100 $CS --tool $tool .gpu/s6/w16t/t_assign_tc 2>&1 | grep -E "ERROR SUMMARY|test result" ; done 2>&1 | tee $OUT/sanitizer.log
