#!/usr/bin/env bash
# The `cross-aarch64` cell of ci/matrix.toml: cross builds for
# aarch64-unknown-linux-gnu (Grace Hopper, Jetson Thor) from this x86 box,
# checked as far as a machine with no aarch64 GPU can check them.
#
# Installs what it needs (apt-get as root or through sudo: the Debian cross
# compiler and qemu-user; rustup's aarch64 std; the aarch64 CUDA runtime
# beside the pinned toolkit), then:
#   1. cuda-build's real-nvcc cross test (static modules are aarch64 objects),
#      with KILN_REQUIRE_CROSS=1: a missing piece fails instead of `not run:`;
#   2. examples/downstream (fat binaries only) and examples/kernel-trees
#      (static host launchers, an rdc static library) built for aarch64 and
#      their tests run under qemu-aarch64 (their GPU halves say `skipped:`:
#      qemu has no GPU);
#   3. `cargo kiln audit --arch sm_87,sm_90` of each cross build, which must
#      list SASS for sm_87 (Jetson Orin) and sm_90 (GH200).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
triple=aarch64-unknown-linux-gnu

need_apt=()
command -v aarch64-linux-gnu-g++ >/dev/null || need_apt+=(g++-aarch64-linux-gnu)
command -v qemu-aarch64 >/dev/null || need_apt+=(qemu-user)
if [ ${#need_apt[@]} -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "cross-aarch64: installing ${need_apt[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need_apt[@]}"
fi
if ! rustc --print target-list >/dev/null || ! [ -d "$(rustc --print sysroot)/lib/rustlib/$triple" ]; then
  rustup target add "$triple"
fi
cargo xtask toolkit install --target "$triple"
cargo build -q -p cargo-kiln

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
export CUDA_PATH="$root/target/cuda-toolkit/cuda"

echo "cross-aarch64: [1/3] cuda-build's real-nvcc cross test"
KILN_REQUIRE_CROSS=1 cargo test -p kiln-cuda-build --test cross

# One target dir for both examples: their dependencies compile once.
export CARGO_TARGET_DIR="$root/target/cross-aarch64"
for example in downstream kernel-trees; do
  echo "cross-aarch64: [2/3] examples/$example for $triple, tests under qemu-aarch64"
  prefix=$([ "$example" = downstream ] && echo DOWNSTREAM || echo KT)
  env "${prefix}_REQUIRE_CUDA=1" \
    cargo test --manifest-path "examples/$example/Cargo.toml" --target "$triple"
done

for example in downstream kernel-trees; do
  echo "cross-aarch64: [3/3] cargo kiln audit of examples/$example built for $triple"
  report=$(CARGO_BUILD_TARGET="$triple" "$root/target/debug/cargo-kiln" kiln audit \
    --arch sm_87,sm_90 --manifest-path "examples/$example/Cargo.toml")
  echo "$report"
  for arch in sm_87 sm_90; do
    if ! grep -qE "[[:space:]]$arch[[:space:]]" <<<"$report"; then
      echo "cross-aarch64: the audit of examples/$example lists no $arch SASS" >&2
      exit 1
    fi
  done
done
echo "cross-aarch64: both examples cross-build for $triple; their CPU tests pass under qemu; SASS sm_87 and sm_90"
