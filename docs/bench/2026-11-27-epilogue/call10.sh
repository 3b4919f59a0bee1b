#!/usr/bin/env bash
# issue 28, session 29 call 10: M = 2117022's kernels, R = the same with the refinement of two
# points at a time; outputs' hash, then times, interleaved.
cd "$(dirname "$0")"
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
chmod +x harness-*
for v in M R; do REPS=2 timeout 90 ./harness-$v 10000,80,300 10000,80,300,1 1000,32,5000 300,64,70,1 3000,4096,200,1 1000,64,100 > $OUT/small_$v.log 2>&1; echo "SMALL $v rc=$?"; grep -E "hash|DIFFERENT|RESULT" $OUT/small_$v.log; done
SH="1000000,128,2048 1000000,768,4096 100000,768,1024 100000,384,1024 100000,1536,1024 50000,2048,256 10000,128,256"
for v in M R R M; do
  REPS=5 timeout 200 ./harness-$v $SH > $OUT/run_$v.log 2>&1
  echo "RUN $v rc=$?"; grep -E "SHAPE|TIME|DIFFERENT|RESULT|hash" $OUT/run_$v.log | awk '/SHAPE/{s=$2"x"$4"x"$6} /hash/{print "  " s, "hash", $NF} /TIME/{printf "  %s %-10s %s\n", s, $2, $3} /RESULT|DIFFERENT/{print}'
done
echo "ELAPSED $SECONDS s"
