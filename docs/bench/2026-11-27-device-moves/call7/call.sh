#!/usr/bin/env bash
# issue 28, call 7: the bundle's `run.sh bench` with the anchors beside run.sh (xtask bench
# --kmeans-anchors: kiln's anneal against the five k-means modes, bench/kmeans.md).
cd "$(dirname "$0")"
set -o pipefail
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
for f in ../../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
tar xJf ../../target/gpu-bundle.tar.xz -C /tmp
cp -r ../c4/anchors/kmeans_anchors.py ../c4/anchors/flash-kmeans ../c4/anchors/torch_anchor.py /tmp/gpu-bundle/
cd /tmp/gpu-bundle
timeout 300 ./bin/xtask bench --apps bin/apps --torch-script torch_anchor.py --kmeans-anchors kmeans_anchors.py --quick --out $OUT/bench > $OUT/bench.log 2>&1; echo "BENCH quick rc=$?"; tail -30 $OUT/bench.log; ls $OUT/bench 2>/dev/null; cat $OUT/bench/kmeans.md 2>/dev/null
echo "ELAPSED $SECONDS s"
