# Session 7, call 9: the quick k-means bench (`xtask bench --kmeans-anchors
# --quick`) of the bundle of f44dd9c (the anneal as committed at the end of
# this session; 74ba94f changes only the encode) on three kinds, kiln and
# the anchors on the same files.
set -u
tar xJf target/gpu-bundle.tar.xz -C /tmp
cp -r .gpu/anchors/* /tmp/gpu-bundle/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cd /tmp/gpu-bundle
timeout 400 ./bin/xtask bench --apps bin/apps --kmeans-anchors kmeans_anchors.py --quick --kinds normal,offset,embedding --out $OUT/bench > $OUT/bench.log 2>&1; echo "bench rc $?"
tail -4 $OUT/bench.log; cat $OUT/bench/kmeans.md 2>/dev/null | head -40
