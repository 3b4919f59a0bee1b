# Session 8, call 9 (2 x H200): the multi-GPU paths with this session's
# changes (the pass's reads with the run in the sharded and rank engines;
# no fused update there): the anneal sharded over both GPUs against one, the
# distributed and rank tests, and run.sh ranks.
set -u
tar xJf target/gpu-bundle.tar.xz -C /tmp
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cd /tmp/gpu-bundle
for t in anneal__anneal anneal__distributed anneal__rank_session gpu-core__multi_gpu gpu-core__ranks; do
  echo "== $t"; KILN_REQUIRE_GPU=1 timeout 150 ./bin/$t --test-threads=1 --nocapture 2>&1 | grep -E "^test |test result|panicked|on 1 / 2 GPUs" | head -30
done
timeout 200 bash run.sh ranks 2>&1 | tail -12
