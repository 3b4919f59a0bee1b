#!/usr/bin/env bash
# ranks: all GPUs vs one (setup and iterations), killed rank, two hosts over sockets; then 2 GPUs; then sockets only.
repo=$PWD; cd /tmp && rm -rf gpu-bundle && tar xJf $repo/target/gpu-bundle.tar.xz && cd gpu-bundle
nvidia-smi --query-gpu=name --format=csv
for f in $repo/.gl/*.deb; do dpkg -x $f /; done; ldconfig
KILN_REQUIRE_GPU=1 KILN_REQUIRE_WGPU=1 timeout 120 ./bin/apps__anneal_wgpu --test-threads=1 > $OUT/wgpu.log 2>&1; echo "apps__anneal_wgpu rc=$?"; grep "test result" $OUT/wgpu.log
timeout 240 bash run.sh ranks > $OUT/ranks_all.log 2>&1; echo "ranks all rc=$?"; grep -E "ranks:|launch to result|setup|PASS|FAIL|not run" $OUT/ranks_all.log | head -40
CUDA_VISIBLE_DEVICES=0,1 timeout 150 bash run.sh ranks > $OUT/ranks_2.log 2>&1; echo "ranks 2 rc=$?"; grep -E "ranks:|launch to result|PASS|FAIL" $OUT/ranks_2.log | head -12
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 timeout 120 bash run.sh ranks > $OUT/ranks_sockets.log 2>&1; echo "ranks sockets rc=$?"; grep -E "ranks:|launch to result|PASS|FAIL" $OUT/ranks_sockets.log | head -12
