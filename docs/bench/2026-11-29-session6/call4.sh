# Session 6, call 4: the final build (`cargo xtask gpu-bundle` of d0e0f39's
# tree: its bin/apps is fin) against base (main's apps before this session)
# on the same files: iterations' time, same assignments and anchors, list
# shares; Flash on the same files; the quick k-means bench through xtask;
# racecheck's report on the tc tests in full; the GPU suite (run.sh tests,
# the Vulkan loader carried).
set -u
tar xJf target/gpu-bundle.tar.xz -C /tmp
(cd .gpu && python3 -c "import tarfile; tarfile.open('pp.tar.xz').extractall()")
cp -r .gpu/anchors/* /tmp/gpu-bundle/
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds; A=.gpu/anchors; FIN=/tmp/gpu-bundle/bin/apps; BASE=.gpu/pp/base/apps
python3 .gpu/gen.py $D normal:1000000:128 offset:1000000:128 normal:1000000:64 embed:200000:128 normal:10000:128 normal:100000:768 normal:1000000:768 offset:1000000:768 >/dev/null
for s in normal:1000000:128:2048:10 offset:1000000:128:2048:10 normal:1000000:64:2048:10 embed:200000:128:16384:10 normal:10000:128:256:30 normal:100000:768:1024:10 normal:1000000:768:4096:10 offset:1000000:768:4096:10; do
  IFS=: read kind n d m it <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for rep in 1 2 3; do for b in BASE FIN; do eval B=\$$b
    echo "R4 $kind ${n}x${d}x${m}x$it $b $rep $($B anneal --npy $f --m $m --iters $it --tol 0 --backend cuda --out /tmp/o_$b --force 2>&1 | grep -oE 'iterations [0-9.]+ ms' | head -1)"
  done; done
  cmp -s /tmp/o_BASE/assignments.npy /tmp/o_FIN/assignments.npy && cmp -s /tmp/o_BASE/anchors.npy /tmp/o_FIN/anchors.npy && echo "SAME $kind ${n}x${d}x${m}" || echo "DIFF $kind ${n}x${d}x${m}"
  echo "STATS $kind ${n}x${d}x${m} FIN: $(KILN_ANNEAL_TC_STATS=1 $FIN anneal --npy $f --m $m --iters 10 --tol 0 --backend cuda 2>&1 | grep -oE '\([0-9.]+%\)' | tr '\n' ' ')"
done 2>&1 | tee $OUT/r4.log
for s in normal:1000000:128:2048 offset:1000000:128:2048 normal:1000000:64:2048 embed:200000:128:16384 normal:100000:768:1024 normal:1000000:768:4096 offset:1000000:768:4096; do
  IFS=: read kind n d m <<<"$s"
  PYTHONPATH=$A/flash-kmeans timeout 200 python3 $A/kmeans_anchors.py $n,$d,$m --npy $D/$kind 2>/dev/null | grep "_ms" | tr -d ' \n' | sed "s/^/ANCHORS $kind ${n}x${d}x${m} /"; echo
done 2>&1 | tee $OUT/anchors.log
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
cd /tmp/gpu-bundle
timeout 170 ./bin/xtask bench --apps bin/apps --kmeans-anchors kmeans_anchors.py --quick --kinds normal,offset,embedding --out $OUT/bench > $OUT/bench.log 2>&1; echo "bench rc $?"; tail -5 $OUT/bench.log
echo "== racecheck (every test of anneal__assign_tc, one thread)"; KILN_REQUIRE_GPU=1 timeout 150 $CS --tool racecheck ./bin/anneal__assign_tc --test-threads 1 > $OUT/racecheck.log 2>&1; echo "rc=$?"
grep -E "RACECHECK SUMMARY|test result|Race reported|Error|^test " $OUT/racecheck.log | head -40
timeout 240 bash run.sh tests > $OUT/suite.log 2>&1; echo "suite rc $?"; grep -vE "^\s*$" $OUT/suite.log | tail -60
