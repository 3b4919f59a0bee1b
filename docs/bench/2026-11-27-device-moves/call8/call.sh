#!/usr/bin/env bash
# issue 28, call 8: the GPU suite on the final build (Vulkan loader carried), and the anneal's GPU tests under memcheck.
cd "$(dirname "$0")"
set -o pipefail
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
for f in ../../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
tar xJf ../../target/gpu-bundle.tar.xz -C /tmp
cd /tmp/gpu-bundle
bash run.sh tests > $OUT/suite.log 2>&1; echo "SUITE rc=$?"; grep -E "^<== .*FAIL|gpu-bundle:" $OUT/suite.log; grep -E "the host's bits|listed: plain|identical" $OUT/suite.log
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 99 ./bin/anneal__anneal --test-threads=1 > $OUT/san_anneal_memcheck.txt 2>&1; echo "SAN anneal memcheck rc=$? $(tail -1 $OUT/san_anneal_memcheck.txt)"
echo "ELAPSED $SECONDS s"
