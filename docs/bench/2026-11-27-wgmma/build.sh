#!/usr/bin/env bash
# Builds the harness here (real nvcc of target/cuda-toolkit, sm_90a only).
set -euo pipefail
cd "$(dirname "$0")"
R=../../..
NV=${NVCC:-$R/target/cuda-toolkit/cuda/bin/nvcc}
F=(-gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -lineinfo -I $R/kernels/include -I $R/crates/cuda-build/include)
$NV "${F[@]}" -c $R/kernels/anneal_tc.cu -o /tmp/anneal_tc.o
# anneal_tc.cu before the shared anneal_tc_device.cuh, every entry point renamed orig_*.
git -C $R show c9e4f60:kernels/anneal_tc.cu > /tmp/anneal_tc_orig.cu
REN=()
for k in absmax_f32 absmax_f16 to_half_f32 to_half_f16 assign_tc_f32 assign_tc_f16 assign_tc_slim_f32 \
         assign_tc_slim_f16 assign_list_f32 assign_list_f16 assign_list_finish; do REN+=(-Danneal_$k=orig_$k); done
$NV "${F[@]}" "${REN[@]}" -c /tmp/anneal_tc_orig.cu -o /tmp/anneal_tc_orig.o
$NV "${F[@]}" -Xptxas -v -c harness.cu -o /tmp/harness.o 2>&1 | grep -E "Compiling|spill|Used|warning" || true
$NV -gencode arch=compute_90a,code=sm_90a -L $R/target/cuda-toolkit/cuda/lib /tmp/harness.o /tmp/anneal_tc.o /tmp/anneal_tc_orig.o -o ${OUTBIN:-harness}
