#!/usr/bin/env bash
# bench.sh VARIANTS... : kiln's anneal per variant (bin-NAME/apps, NAME@TILE sets
# KILN_ANNEAL_TC_TILE), interleaved per shape and rep, on DIR/x_N_D.npy (SHAPES: n,d,k list).
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
SHAPES=${SHAPES:-"10000,128,256 1000000,128,2048 100000,768,1024 1000000,768,4096"}
pts=()
for s in $SHAPES; do IFS=, read n d k <<<"$s"; pts+=("$n,$d"); done
python3 gen.py /tmp/pts "${pts[@]}" >&2
for s in $SHAPES; do
  IFS=, read n d k <<<"$s"
  for rep in $(seq 1 ${REPS:-2}); do
    for v in "$@"; do
      b=${v%@*}; tile=auto; [[ $v == *@* ]] && tile=${v#*@}
      r=$(KILN_ANNEAL_TC_TILE=$tile ./bin-$b/apps anneal --npy /tmp/pts/x_${n}_${d}.npy --m $k --iters ${ITERS:-10} --tol 0 --backend cuda 2>&1)
      echo "KILN $v $n x $d x $k rep$rep: $(grep -E '^cuda' <<<"$r" | head -1)"
      echo "  $(grep -E "time:|whole run" <<<"$r" | tr "\n" " ")"
    done
  done
done
