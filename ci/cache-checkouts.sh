#!/usr/bin/env bash
# The kernel cache shared across checkouts (issue 42): examples/downstream's
# tracked files copied to two paths of different depth in a temp dir, as two
# checkouts (or two CI runners) would hold them, built one after the other
# with one empty KILN_CACHE_DIR and the real nvcc behind an NVCC wrapper
# that counts its steps. The first checkout compiles; the second, at the
# other path, must run 0 nvcc steps, all served from the cache, and what
# its build watches (rerun-if-changed) and its manifest name must be its own
# files, never the first checkout's.
# Usage: bash ci/cache-checkouts.sh
#   CUDA_PATH  the toolkit (default target/cuda-toolkit/cuda, where
#              `cargo xtask toolkit install` puts it)
#   CARGO_TARGET_DIR  where both build (default target/downstream: the
#              example's dependencies are already built there)
# The copies name kiln's crates by this checkout's absolute path, so that
# both build the same dependency packages once.
set -euo pipefail
cd "$(dirname "$0")/.."
ws=$(pwd)
toolkit=${CUDA_PATH:-$ws/target/cuda-toolkit/cuda}
[[ -x $toolkit/bin/nvcc ]] || {
  echo "cache-checkouts: no nvcc at $toolkit/bin/nvcc; set CUDA_PATH or run \`cargo xtask toolkit install\`" >&2
  exit 1
}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ws/target/downstream}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# nvcc's steps, counted: every call but discovery's queries.
cat >"$tmp/nvcc" <<EOF
#!/usr/bin/env bash
case "\${1-}" in --version|--list-gpu-code|--list-gpu-arch) ;; *) echo "nvcc \$*" >>"$tmp/nvcc.log" ;; esac
exec "$toolkit/bin/nvcc" "\$@"
EOF
chmod +x "$tmp/nvcc"

# A checkout of the example at $1: its tracked files, kiln's crates by path.
checkout() {
  mkdir -p "$1"
  git ls-files -z examples/downstream | xargs -0 cp --parents -t "$1"
  sed -i "s#path = \"../../crates/#path = \"$ws/crates/#" "$1/examples/downstream/Cargo.toml"
}

# Builds the checkout at $1; prints how many nvcc steps it ran.
build() {
  rm -f "$tmp/nvcc.log"
  env KILN_CACHE=on KILN_CACHE_DIR="$tmp/cache" NVCC="$tmp/nvcc" CUDA_PATH="$toolkit" \
    DOWNSTREAM_REQUIRE_CUDA=1 DOWNSTREAM_CUDA_ARCHS=sm_80 \
    cargo build -q --manifest-path "$1/examples/downstream/Cargo.toml" >&2
  if [[ -f $tmp/nvcc.log ]]; then wc -l <"$tmp/nvcc.log"; else echo 0; fi
}

one=$tmp/one
two=$tmp/second/checkout/at/another/path
checkout "$one"
checkout "$two"

started=$SECONDS
steps=$(build "$one")
echo "cache-checkouts: first checkout ($one): $steps nvcc steps"
(( steps > 0 )) || { echo "cache-checkouts: the first checkout ran no nvcc step: is the cache empty?" >&2; exit 1; }

steps=$(build "$two")
echo "cache-checkouts: second checkout ($two): $steps nvcc steps"
if (( steps != 0 )); then
  echo "cache-checkouts: the second checkout ran nvcc $steps times; each should have been served from the cache:" >&2
  cat "$tmp/nvcc.log" >&2
  exit 1
fi

# The second checkout's build script run: the one whose output watches its
# kernels. It and its manifest name none of the first checkout's files.
output=$(grep -l -F "rerun-if-changed=$two/examples/downstream/kernels" \
  "$CARGO_TARGET_DIR"/debug/build/downstream-*/output)
manifest=$(dirname "$output")/out/downstream-manifest.toml
grep -q '^hits = 1$' "$manifest" || { echo "cache-checkouts: $manifest reports no cache hit:" >&2; cat "$manifest" >&2; exit 1; }
if grep -F "$one/" "$output" "$manifest"; then
  echo "cache-checkouts: the second checkout's build names the first checkout's files (above)" >&2
  exit 1
fi
echo "cache-checkouts: ok, the second checkout built from the cache with 0 nvcc steps ($((SECONDS - started)) s)"
