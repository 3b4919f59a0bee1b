#!/usr/bin/env bash
# kiln-anneal built outside kiln's workspace, from a copy of exactly the
# files `cargo package -p kiln-anneal --list` ships (its kernels among
# them), CPU-only: the crate's build script, kernels and bindings stand on
# their own, with no file of the workspace but the crates it depends on
# (by absolute path here, by version once they are published; kiln-output
# is `publish = false`, which is what stops `cargo package` today). The copy
# sits in a workspace of its own whose `[workspace.*]` tables are kiln's
# (the crate inherits them), with kiln's lock file. Needs no toolkit: the
# build is switched off (KILN_ANNEAL_CUDA=off). With `--cuda`, the kernels
# are compiled instead (KILN_ANNEAL_REQUIRE_CUDA=1: the toolkit must be
# found, through NVCC, CUDA_PATH, PATH or the toolkit store).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
crate="$tmp/kiln-anneal"
mkdir -p "$crate"
cargo package -p kiln-anneal --list --allow-dirty --offline 2>/dev/null \
  | grep -v -e '^Cargo.toml.orig$' -e '^Cargo.lock$' -e '^.cargo_vcs_info.json$' \
  | while read -r file; do
      mkdir -p "$crate/$(dirname "$file")"
      cp "crates/anneal/$file" "$crate/$file"
    done
# The copy's own workspace: kiln's [workspace.*] tables with its path
# dependencies made absolute, and this crate as the one member.
sed -e 's|^members = .*|members = ["kiln-anneal"]|' \
    -e '/^default-members/d' \
    -e "s|path = \"crates/|path = \"$root/crates/|g" \
    Cargo.toml > "$tmp/Cargo.toml"
cp Cargo.lock "$tmp/Cargo.lock"
for needed in kernels/kiln.toml kernels/anneal_sort.cu src/bindings.rs build.rs; do
  [[ -f $crate/$needed ]] || { echo "the package lacks $needed"; exit 1; }
done
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target/anneal-outside}"
if [[ ${1:-} == --cuda ]]; then
  export KILN_ANNEAL_REQUIRE_CUDA=1
  unset KILN_ANNEAL_CUDA
  mode="with its kernels compiled"
else
  export KILN_ANNEAL_CUDA=off
  mode="CPU-only"
fi
cargo build --manifest-path "$tmp/Cargo.toml" -p kiln-anneal
cargo test --manifest-path "$tmp/Cargo.toml" -p kiln-anneal --doc
echo "ok: kiln-anneal builds and tests outside the workspace ($mode), from its package's files"
