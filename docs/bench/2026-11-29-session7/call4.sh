# Session 7, call 4: stream-local buffers (the bundle's apps, `new`) against
# main's (`base`) on the same files, outputs compared byte for byte; where a
# 10K iteration's GPU time goes now (ncu, clocks as they run), per kernel,
# for the tile choices; then the GPU suite with the Vulkan loader.
set -u
tar xJf target/gpu-bundle.tar.xz -C /tmp
(cd .gpu/s7 && python3 -c "import tarfile; tarfile.open('base.tar.xz').extractall()")
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds; NEW=/tmp/gpu-bundle/bin/apps; BASE=.gpu/s7/base/apps
python3 .gpu/gen.py $D normal:10000:128 offset:10000:128 embed:10000:128 normal:100000:128 normal:1000000:128 normal:1000000:768 >/dev/null
for s in normal:10000:128:256:30 offset:10000:128:256:30 embed:10000:128:256:30 normal:100000:128:1024:30 normal:1000000:128:2048:10 normal:1000000:768:4096:10; do
  IFS=: read kind n d m it <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for rep in 1 2 3; do for b in BASE NEW; do eval B=\$$b
    echo "R $kind ${n}x${d}x${m}x$it $b $rep $($B anneal --npy $f --m $m --iters $it --tol 0 --backend cuda --out /tmp/o_$b --force 2>&1 | grep -E 'time:' | grep -oE 'iterations [0-9.]+ ms in [0-9]+ runs, maintenance [0-9.]+ ms')"
  done; done
  cmp -s /tmp/o_BASE/assignments.npy /tmp/o_NEW/assignments.npy && cmp -s /tmp/o_BASE/anchors.npy /tmp/o_NEW/anchors.npy && echo "SAME $kind ${n}x${d}x${m}" || echo "DIFF $kind ${n}x${d}x${m}"
done 2>&1 | tee $OUT/runs.log
f=$D/normal/x_10000_128.npy
for t in auto 64 simt; do
  case $t in auto) E="";; 64) E="KILN_ANNEAL_TC_TILE=64";; simt) E="KILN_ANNEAL_TC=0";; esac
  for rep in 1 2 3; do echo "TILE $t $(env $E $NEW anneal --npy $f --m 256 --iters 30 --tol 0 --backend cuda 2>&1 | grep -oE 'iterations [0-9.]+ ms in')"; done
  env $E ncu --clock-control none --metrics gpu__time_duration.sum --csv $NEW anneal --npy $f --m 256 --iters 30 --tol 0 --backend cuda > $OUT/ncu_$t.csv 2>/dev/null; python3 .gpu/prof.py $OUT/ncu_$t.csv $t
done
cd /tmp/gpu-bundle
timeout 300 bash run.sh tests > $OUT/suite.log 2>&1; echo "suite rc $?"; grep -vE "^\s*$" $OUT/suite.log | tail -40
