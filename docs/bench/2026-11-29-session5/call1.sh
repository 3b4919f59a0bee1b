# The shifted epilogue (branch narrow-epilogue), one call: its GPU tests,
# then old (d32 = main's kernels) against new (epi) on the narrow-d, large-k
# and wide shapes of issue 39 over the data kinds, the list-kernel share of
# each, and kmeans_anchors.py on the same files.
set -u
(cd .gpu && python3 -c "import tarfile; tarfile.open('d32.tar.xz').extractall(); tarfile.open('epi.tar.xz').extractall()")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
OLD=.gpu/d32/apps; NEW=.gpu/epi/apps; A=.gpu/anchors; D=/tmp/kinds
python3 .gpu/gen.py $D normal:1000000:128 offset:1000000:128 clustered:1000000:128 aniso:1000000:128 normal:1000000:64 embed:200000:128 normal:1000000:768 offset:1000000:768 >/dev/null
for s in normal:1000000:128:2048 offset:1000000:128:2048 clustered:1000000:128:2048 aniso:1000000:128:2048 normal:1000000:64:2048 embed:200000:128:16384 normal:1000000:768:4096 offset:1000000:768:4096; do
  IFS=: read kind n d m <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for rep in 1 2; do for b in OLD NEW; do eval B=\$$b
    echo "RESULT $kind ${n}x${d}x${m} $b rep$rep $($B anneal --npy $f --m $m --iters 10 --tol 0 --backend cuda --out /tmp/o_$b --force 2>&1 | grep -E '^whole run')"
  done; done
  cmp /tmp/o_OLD/assignments.npy /tmp/o_NEW/assignments.npy >/dev/null 2>&1 && echo "SAME $kind ${n}x${d}x${m}: old and new assignments the same bytes" || echo "DIFF $kind ${n}x${d}x${m}: $(ls /tmp/o_NEW)"
  for b in OLD NEW; do eval B=\$$b; echo "STATS $kind ${n}x${d}x${m} $b: $(KILN_ANNEAL_TC_STATS=1 $B anneal --npy $f --m $m --iters 10 --tol 0 --backend cuda 2>&1 | grep -oE '\([0-9.]+%\)' | tr '\n' ' ')"; done
  PYTHONPATH=$A/flash-kmeans timeout 200 python3 $A/kmeans_anchors.py $n,$d,$m --npy $D/$kind 2>/dev/null | grep "_ms" | tr -d ' \n' | sed "s/^/ANCHORS $kind ${n}x${d}x${m} /"; echo
done 2>&1 | tee $OUT/bench.log
for t in .gpu/epi/t_*; do echo "== $t"; KILN_REQUIRE_GPU=1 timeout 100 $t 2>&1 | grep -E "^test result|panicked|FAILED" | head -8; done 2>&1 | tee $OUT/tests.log
