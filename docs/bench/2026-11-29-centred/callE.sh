# The k > 10K class and 1M x 768 x 4096 normal beside offset, merged build.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
D=/tmp/kinds; A=.gpu/anchors; APPS=.gpu/d/apps
python3 .gpu/gen.py $D normal:200000:128 offset:200000:128 embed:200000:128 normal:1000000:768 offset:1000000:768
for s in normal:200000:128:16384 offset:200000:128:16384 embed:200000:128:16384 normal:1000000:768:4096 offset:1000000:768:4096; do
  IFS=: read kind n d m <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for rep in 1 2; do echo "RESULT $kind ${n}x${d}x${m} new rep$rep $($APPS anneal --npy $f --m $m --iters 10 --tol 0 --backend cuda 2>&1 | grep -E '^whole run')"; done
  echo "STATS $kind ${n}x${d}x${m} new: $(KILN_ANNEAL_TC_STATS=1 $APPS anneal --npy $f --m $m --iters 10 --tol 0 --backend cuda 2>&1 | grep -oE '\([0-9.]+%\)' | tr '\n' ' ')"
  PYTHONPATH=$A/flash-kmeans timeout 200 python3 $A/kmeans_anchors.py $n,$d,$m --npy $D/$kind 2>/dev/null | grep "_ms" | tr -d ' \n' | sed "s/^/ANCHORS $kind ${n}x${d}x${m} /"; echo
done 2>&1 | tee $OUT/bench.log
