# Session 7, call 10 (2 x H200): the multi-GPU paths after the shard buffers
# became stream-local: the anneal sharded over both GPUs (NCCL all-reduce on
# the shard streams) against one GPU, the distributed and rank tests, and
# run.sh ranks (one process per GPU against one process).
set -u
tar xJf target/gpu-bundle.tar.xz -C /tmp
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cd /tmp/gpu-bundle
for t in anneal__anneal anneal__distributed anneal__rank_session gpu-core__multi_gpu gpu-core__ranks gpu-core__local; do
  echo "== $t"; KILN_REQUIRE_GPU=1 timeout 150 ./bin/$t --test-threads=1 --nocapture 2>&1 | grep -E "^test |test result|panicked|sharded|GPUs|gpus" | head -30
done
timeout 200 bash run.sh ranks 2>&1 | tail -25
