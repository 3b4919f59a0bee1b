# Session 5, call 5: the final build. The stager's whole buffers at 16 MiB
# (v16 = HEAD) against 32 MiB (v32), the setup at 1M x 768 x 4096 f32;
# encode_gpu five times (the small first buffer's first read); the quick
# k-means bench on three kinds through `xtask bench` (the whole-run line
# with the setup's parts); then the GPU suite (`run.sh tests`).
set -u
R=$PWD
tar xJf target/gpu-bundle.tar.xz -C /tmp
(cd .gpu && python3 -c "import tarfile; tarfile.open('v.tar.xz').extractall()")
cp -r .gpu/anchors/* /tmp/gpu-bundle/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds; python3 .gpu/gen.py $D normal:1000000:768 >/dev/null
f=$D/normal/x_1000000_768.npy; cat $f >/dev/null
for rep in 1 2 3 4; do for b in v16 v32; do
  echo "SETUP $b $rep $(.gpu/$b/apps anneal --npy $f --m 4096 --iters 10 --tol 0 --backend cuda --out /tmp/o_$b --force 2>&1 | grep -E '^whole run')"
done; cmp /tmp/o_v16/assignments.npy /tmp/o_v32/assignments.npy && echo "SAME $rep"; done 2>&1 | tee $OUT/setup.log
cd /tmp/gpu-bundle
for i in 1 2 3 4 5; do KILN_REQUIRE_GPU=1 ./bin/anneal__encode_gpu --test-threads=1 2>&1 | grep -E "^test result|panicked"; done 2>&1 | tee $OUT/encode_gpu.log
timeout 170 ./bin/xtask bench --apps bin/apps --kmeans-anchors kmeans_anchors.py --quick --kinds normal,offset,embedding --out $OUT/bench > $OUT/bench.log 2>&1; echo "bench rc $?"; tail -5 $OUT/bench.log
timeout 240 bash run.sh tests > $OUT/suite.log 2>&1; echo "suite rc $?"; grep -vE "^\s*$" $OUT/suite.log | tail -60
