set -u
nvidia-smi --query-gpu=name --format=csv,noheader
cd .gpu/d
cp -r ../anchors/* .
timeout 540 ./xtask bench --apps ./apps --kmeans-anchors kmeans_anchors.py --quick --kinds normal,offset,scaled-up,scaled-down,clustered,anisotropic --out $OUT/bench > $OUT/bench.log 2>&1; echo "rc $?"
tail -5 $OUT/bench.log
cat $OUT/bench/kmeans.md | head -60
