#!/usr/bin/env bash
# issue 28, session 29 call 4: the assignment kernels of four trees, interleaved twice:
# A = HEAD, P = A + the refinement's norms loaded with its dots, N = P + the narrow-tile shared bound.
cd "$(dirname "$0")"
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
chmod +x harness-*
SH="1000000,128,2048 100000,768,1024 1000000,768,4096 50000,2048,256 100000,384,1024 10000,128,256 100000,1536,1024"
for v in A N; do REPS=2 timeout 90 ./harness-$v 10000,80,300 10000,80,300,1 1000,32,5000 300,64,70,1 3000,4096,200,1 > $OUT/small_$v.log 2>&1; echo "SMALL $v rc=$?"; grep -E "hash|DIFFERENT|RESULT" $OUT/small_$v.log; done
for v in A N; do MEANS=1 REPS=2 timeout 200 ./harness-$v 1000000,128,2048 100000,768,1024 > $OUT/means_$v.log 2>&1; echo "MEANS $v rc=$?"; grep -E "hash|DIFFERENT|RESULT|TIME|listed" $OUT/means_$v.log; done
for v in A P N N P A; do
  REPS=5 timeout 200 ./harness-$v $SH > $OUT/run_$v.log 2>&1
  echo "RUN $v rc=$?"; grep -E "SHAPE|TIME|DIFFERENT|RESULT|hash" $OUT/run_$v.log | awk '/SHAPE/{s=$2"x"$4"x"$6} /hash/{print "  " s, "hash", $NF} /TIME/{printf "  %s %-10s %s\n", s, $2, $3} /RESULT|DIFFERENT/{print}'
done
echo "ELAPSED $SECONDS s"
