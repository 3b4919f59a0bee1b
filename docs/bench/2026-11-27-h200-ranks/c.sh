#!/usr/bin/env bash
# two hosts (network namespaces, NCCL sockets) on the GPU host, with Debian's ip carried.
repo=$PWD; source $repo/.devcarry/ipr/setup.sh
cd /tmp && rm -rf gpu-bundle && tar xJf $repo/target/gpu-bundle.tar.xz && cd gpu-bundle
nvidia-smi --query-gpu=name --format=csv
timeout 300 bash run.sh two-hosts > $OUT/two_hosts.log 2>&1; echo "two-hosts rc=$?"; tail -30 $OUT/two_hosts.log
