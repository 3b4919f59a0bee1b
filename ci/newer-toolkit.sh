#!/usr/bin/env bash
# A second toolkit beside the pinned one: the newest CUDA 13.x from the PyPI
# wheels (nvcc, with nvvm and crt of exactly its version: a mixed install
# fails in ptxas; the newest cccl, runtime and cuobjdump of CUDA 13), found
# through CUDA_PATH. examples/downstream built with it
# must warn once that its PTX is newer than the driver floor (CUDA 13.0)
# JITs, naming the three fixes; fail in one line under
# DOWNSTREAM_REQUIRE_CUDA=1; and `cargo kiln audit` must report the PTX ISA
# against the floor and no table that names no kernel. Then CUDA_PATH at the
# CUDA 12 nvcc wheel, which ships ptxas and no nvcc: one warning naming what
# the build took instead, and one line under DOWNSTREAM_REQUIRE_CUDA=1. No
# build script may panic. The wheels stay in target/cuda-newer between runs (pip reinstalls
# only when a newer 13.x is out); the crate builds in target/downstream, whose
# dependencies the downstream cells already built.
set -euo pipefail
cd "$(dirname "$0")/.."
root_dir=$PWD
dir=target/cuda-newer
log=$(mktemp)
trap 'rm -f "$log"' EXIT

fail() { echo "newer-toolkit: $*" >&2; exit 1; }

[[ -x $dir/venv/bin/python ]] || python3 -m venv "$dir/venv"
pip() { "$dir/venv/bin/python" -m pip -q --disable-pip-version-check "$@"; }
pip install --upgrade "nvidia-cuda-nvcc>=13.1,<14"
version=$("$dir/venv/bin/python" -c 'import importlib.metadata as m; print(m.version("nvidia-cuda-nvcc"))')
minor=${version%.*}
# cccl's wheels carry CCCL's own version (13.3.5 is CCCL 3.5): the newest
# of CUDA 13, as are the runtime and cuobjdump.
pip install "nvidia-nvvm==$version" "nvidia-cuda-crt==$version" \
  "nvidia-cuda-cccl>=13.0,<14" "nvidia-cuda-runtime>=13.0,<14" "nvidia-cuda-cuobjdump>=13.0,<14"
cuda=$(echo "$root_dir/$dir"/venv/lib/python3*/site-packages/nvidia/cu13)
[[ -x $cuda/bin/nvcc ]] || fail "no nvcc in $cuda after installing nvidia-cuda-nvcc $version"
echo "newer-toolkit: CUDA $version at $cuda"
isa="9.${minor#13.}"

unset NVCC CUDA_HOME CUDA_ROOT DOWNSTREAM_REQUIRE_CUDA DOWNSTREAM_CUDA
export CUDA_PATH=$cuda CARGO_TARGET_DIR=$root_dir/target/downstream
manifest=examples/downstream/Cargo.toml

# 1. The build warns once, naming the fixes.
cargo build --manifest-path "$manifest" >"$log" 2>&1 || { cat "$log"; fail "the build failed"; }
! grep -q panicked "$log" || { cat "$log"; fail "a build script panicked"; }
warnings=$(grep -c "writes PTX ISA $isa, which the oldest driver these kernels serve, CUDA 13.0" "$log" || true)
[[ $warnings == 1 ]] || { cat "$log"; fail "expected one driver-floor warning, saw $warnings"; }
for fix in "cargo kiln toolkit install" "build SASS only" "raise the floor in kiln-audit.toml [driver]"; do
  grep -qF "$fix" "$log" || { cat "$log"; fail "the warning does not name: $fix"; }
done
echo "ok: one warning: $(grep -m1 -o "CUDA $version.*cannot JIT" "$log")"

# 2. Under REQUIRE the same line fails the build.
if DOWNSTREAM_REQUIRE_CUDA=1 cargo build --manifest-path "$manifest" >"$log" 2>&1; then
  cat "$log"; fail "DOWNSTREAM_REQUIRE_CUDA=1 built with PTX ISA $isa"
fi
grep -q "DOWNSTREAM_REQUIRE_CUDA=1 but CUDA $version" "$log" || { cat "$log"; fail "REQUIRE failed for another reason"; }
! grep -q panicked "$log" || { cat "$log"; fail "a build script panicked"; }
echo "ok: DOWNSTREAM_REQUIRE_CUDA=1 fails in one line"

# 3. The audit names the PTX ISA against the floor, and every table matches.
(unset CARGO_TARGET_DIR; cargo build -q -p cargo-kiln)
if "$root_dir/target/debug/cargo-kiln" kiln audit --manifest-path "$manifest" >"$log" 2>&1; then
  cat "$log"; fail "the audit passed PTX ISA $isa against a CUDA 13.0 floor"
fi
grep -q "PTX ISA $isa > 9.0, which CUDA 13.0 drivers cannot JIT" "$log" || { cat "$log"; fail "the audit does not name the floor"; }
! grep -q "names no kernel" "$log" || { cat "$log"; fail "an audit table names no kernel under CUDA $version"; }
echo "ok: the audit reports PTX ISA $isa > 9.0 and nothing else of the toolkit"

# 4. CUDA_PATH at the CUDA 12 wheel (ptxas, no nvcc), as a CUDA 12 user sets
# it: one warning naming what the build took instead, one line under REQUIRE.
pip install --no-deps "nvidia-cuda-nvcc-cu12>=12.8,<13"
cu12=$(echo "$root_dir/$dir"/venv/lib/python3*/site-packages/nvidia/cuda_nvcc)
[[ -e $cu12/bin/ptxas && ! -e $cu12/bin/nvcc ]] || fail "the cu12 wheel at $cu12 no longer has the shape this step checks (ptxas, no nvcc)"
CUDA_PATH=$cu12 cargo build --manifest-path "$manifest" >"$log" 2>&1 || { cat "$log"; fail "the build with CUDA_PATH at the cu12 wheel failed"; }
grep -qF "CUDA_PATH=$cu12 (no bin/nvcc) cannot compile CUDA: the build took " "$log" || { cat "$log"; fail "no warning names the cu12 CUDA_PATH"; }
echo "ok: $(grep -m1 -o "CUDA_PATH=$cu12 (no bin/nvcc) cannot compile CUDA.*" "$log")"
if CUDA_PATH=$cu12 DOWNSTREAM_REQUIRE_CUDA=1 cargo build --manifest-path "$manifest" >"$log" 2>&1; then
  cat "$log"; fail "DOWNSTREAM_REQUIRE_CUDA=1 built with CUDA_PATH at a toolkit without nvcc"
fi
grep -qF "DOWNSTREAM_REQUIRE_CUDA=1 but CUDA_PATH=$cu12 (no bin/nvcc) cannot compile CUDA" "$log" || { cat "$log"; fail "REQUIRE failed for another reason"; }
! grep -q panicked "$log" || { cat "$log"; fail "a build script panicked"; }
echo "ok: CUDA_PATH at the cu12 wheel under DOWNSTREAM_REQUIRE_CUDA=1 fails in one line"
