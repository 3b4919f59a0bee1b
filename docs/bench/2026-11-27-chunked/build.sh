#!/usr/bin/env bash
# Builds the harness here (real nvcc of target/cuda-toolkit, sm_90a only).
set -euo pipefail
cd "$(dirname "$0")"
R=../../..
NV=${NVCC:-$R/target/cuda-toolkit/cuda/bin/nvcc}
F=(-gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -lineinfo -I $R/kernels/include -I $R/crates/cuda-build/include)
$NV "${F[@]}" -c $R/kernels/anneal_tc.cu -o /tmp/anneal_tc.o
$NV "${F[@]}" -Xptxas -v -c harness.cu -o /tmp/harness.o 2>&1 | grep -E "error|Compiling|spill|Used|warning" || true
$NV -gencode arch=compute_90a,code=sm_90a -L $R/target/cuda-toolkit/cuda/lib /tmp/harness.o /tmp/anneal_tc.o -o ${OUTBIN:-harness}
