# Session 6, call 3: base (main's apps) against ra (the refinement in a
# kernel of its own), rb (ra + the list in one load, 6 blocks an SM) and rc
# (rb + each lane of a point row keeping its own candidates, 4 stages).
# Iterations' time, same assignments and anchors, rc's list shares; rc's
# GPU tests and sanitizers; racecheck's report on base and rc.
set -u
(cd .gpu && python3 -c "import tarfile; [tarfile.open(f).extractall() for f in ('pp.tar.xz','s6/ra.tar.xz','s6/rb.tar.xz','s6/rc.tar.xz','s6/bt.tar.xz')]")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds
python3 .gpu/gen.py $D normal:1000000:128 offset:1000000:128 normal:1000000:64 embed:200000:128 normal:10000:128 normal:100000:768 normal:1000000:768 offset:1000000:768 >/dev/null
for s in normal:1000000:128:2048:10 offset:1000000:128:2048:10 normal:1000000:64:2048:10 embed:200000:128:16384:10 normal:10000:128:256:30 normal:100000:768:1024:10 normal:1000000:768:4096:10 offset:1000000:768:4096:10; do
  IFS=: read kind n d m it <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for rep in 1 2; do for b in base ra rb rc; do B=.gpu/$b/apps; [ $b = base ] && B=.gpu/pp/base/apps
    echo "R3 $kind ${n}x${d}x${m}x$it $b $rep $($B anneal --npy $f --m $m --iters $it --tol 0 --backend cuda --out /tmp/o_$b --force 2>&1 | grep -oE 'iterations [0-9.]+ ms' | head -1)"
  done; done
  for b in ra rb rc; do cmp -s /tmp/o_base/assignments.npy /tmp/o_$b/assignments.npy && cmp -s /tmp/o_base/anchors.npy /tmp/o_$b/anchors.npy && echo "SAME $kind ${n}x${d}x${m} $b" || echo "DIFF $kind ${n}x${d}x${m} $b"; done
  for b in rb rc; do echo "STATS $kind ${n}x${d}x${m} $b: $(KILN_ANNEAL_TC_STATS=1 .gpu/$b/apps anneal --npy $f --m $m --iters 10 --tol 0 --backend cuda 2>&1 | grep -oE '\([0-9.]+%\)' | tr '\n' ' ')"; done
done 2>&1 | tee $OUT/r3.log
for t in .gpu/rc/t_*; do echo "== $t"; KILN_REQUIRE_GPU=1 timeout 100 $t 2>&1 | grep -E "^test result|panicked|FAILED" -A2 | head -8; done 2>&1 | tee $OUT/tests.log
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck synccheck; do echo "== sanitizer $tool rc"; KILN_REQUIRE_GPU=1 timeout 100 $CS --tool $tool .gpu/rc/t_assign_tc 2>&1 | grep -E "ERROR SUMMARY|test result" ; done 2>&1 | tee $OUT/sanitizer.log
for b in bt rc; do echo "== racecheck $b wgmma test"; KILN_REQUIRE_GPU=1 timeout 100 $CS --tool racecheck .gpu/$b/t_assign_tc wgmma_kernel_matches_reference_on_hopper 2>&1 | grep -vE "^=========\s+(at|by) 0x|^\s*$" | grep -E "Race|Error|hazard|SUMMARY|kernel|test result|Write|Read|at " | head -20; done 2>&1 | tee -a $OUT/sanitizer.log
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
f=$D/normal/x_1000000_128.npy
for b in rb rc; do echo "== ncu $b"; timeout 100 $NCU -k regex:"assign_wgmma|refine_lists" --launch-skip 2 --launch-count 2 --section SpeedOfLight --section Occupancy .gpu/$b/apps anneal --npy $f --m 2048 --iters 3 --tol 0 --backend cuda 2>&1 | grep -E "^  anneal_|Duration|Achieved Occupancy"; done 2>&1 | tee $OUT/ncu.log
