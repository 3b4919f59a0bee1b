# One call: the anneal (new and old build) beside the k-means anchors on the
# same points, several data kinds. Usage: bash .gpu/bench.sh SPEC... where
# SPEC = KIND:N:D:K
set -u
NEW=${NEW:-.gpu/new/apps}; A=.gpu/anchors

D=/tmp/kinds; mkdir -p $D
python3 .gpu/gen.py $D $(for s in "$@"; do IFS=: read k n d m <<<"$s"; echo $k:$n:$d; done)
for s in "$@"; do
  IFS=: read kind n d m <<<"$s"
  f=$D/$kind/x_${n}_${d}.npy
  for bin in $NEW .gpu/apps-old; do
    tag=new; [[ $bin == *old ]] && tag=old
    for rep in 1 2; do
      r=$($bin anneal --npy $f --m $m --iters 10 --tol 0 --backend cuda 2>&1 | grep -E "^whole run" )
      echo "RESULT $kind ${n}x${d}x${m} $tag rep$rep $r"
    done
  done
  st=$(KILN_ANNEAL_TC_STATS=1 $NEW anneal --npy $f --m $m --iters 10 --tol 0 --backend cuda 2>&1 | grep -iE "list|unresolved" | tr '\n' ' ' | cut -c1-600)
  echo "STATS $kind ${n}x${d}x${m} new: $st"
  st=$(KILN_ANNEAL_TC_STATS=1 .gpu/apps-old anneal --npy $f --m $m --iters 10 --tol 0 --backend cuda 2>&1 | grep -iE "list|unresolved" | tr '\n' ' ' | cut -c1-600)
  echo "STATS $kind ${n}x${d}x${m} old: $st"
  PYTHONPATH=$A/flash-kmeans timeout 240 python3 $A/kmeans_anchors.py $n,$d,$m --npy $D/$kind 2>/dev/null | grep "_ms" | tr -d ' \n' | sed "s/^/ANCHORS $kind ${n}x${d}x${m} /"; echo
done
