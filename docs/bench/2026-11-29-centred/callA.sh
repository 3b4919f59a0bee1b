set -u
mkdir -p /tmp/b && tar xJf target/gpu-bundle.tar.xz -C /tmp/b || exit 1
rm -rf target/gpu-bundle; ln -s /tmp/b/gpu-bundle target/gpu-bundle
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export KILN_REQUIRE_GPU=1
for t in anneal__assign_tc anneal__anneal anneal__encode_gpu; do
  echo "== $t"; timeout 200 target/gpu-bundle/bin/$t --test-threads=1 2>&1 | grep -E "^test result|FAILED|panicked|skipped" | head -8
done
bash .gpu/bench.sh "$@" 2>&1 | tee $OUT/bench.log
