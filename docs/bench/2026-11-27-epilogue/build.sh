#!/usr/bin/env bash
# Builds the harness once per kernel tree (real nvcc of target/cuda-toolkit,
# sm_90a only): build.sh NAME=TREE ..., TREE a directory holding kernels/ and
# crates/cuda-build/include, or a git revision (rev:HEAD); writes
# $OUTDIR/harness-NAME. Default: old=rev:HEAD new=. (the working tree).
set -euo pipefail
cd "$(dirname "$0")"
R=$(cd ../../.. && pwd)
NV=${NVCC:-$R/target/cuda-toolkit/cuda/bin/nvcc}
OUTDIR=${OUTDIR:-.}
# The harness: the chunked session's, with harness.patch applied.
src=$(mktemp -d)
patch -s -o "$src/harness.cu" ../2026-11-27-chunked/harness.cu harness.patch
[ $# -eq 0 ] && set -- old=rev:HEAD new=$R
for spec in "$@"; do
  name=${spec%%=*}; tree=${spec#*=}
  work=$(mktemp -d)
  if [[ $tree == rev:* ]]; then
    (cd "$R" && git archive "${tree#rev:}" kernels crates/cuda-build/include) | tar x -C "$work"
  else
    mkdir -p "$work/crates/cuda-build"
    cp -r "$tree/kernels" "$work/" && cp -r "$tree/crates/cuda-build/include" "$work/crates/cuda-build/"
  fi
  mkdir -p "$work/docs/bench/x" && cp "$src/harness.cu" "$work/docs/bench/x/"
  F=(-gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -lineinfo -I $work/kernels/include -I $work/crates/cuda-build/include)
  $NV "${F[@]}" -c $work/kernels/anneal_tc.cu -o $work/anneal_tc.o
  $NV "${F[@]}" -c $work/docs/bench/x/harness.cu -o $work/harness.o
  $NV -gencode arch=compute_90a,code=sm_90a -L $R/target/cuda-toolkit/cuda/lib $work/harness.o $work/anneal_tc.o -o $OUTDIR/harness-$name
  rm -rf "$work"
  echo "built $OUTDIR/harness-$name from $tree"
done
rm -rf "$src"
