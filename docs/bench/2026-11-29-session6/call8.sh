# Session 6, call 8: the quick k-means bench through `xtask bench` with the
# measured list-share column (7a2c42f's release apps and xtask), three kinds.
set -u
(cd .gpu/s6 && python3 -c "import tarfile; tarfile.open('lb.tar.xz').extractall()")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 230 .gpu/s6/lb/xtask bench --apps .gpu/s6/lb/apps --kmeans-anchors .gpu/anchors/kmeans_anchors.py --quick --kinds normal,offset,embedding --out $OUT/bench > $OUT/bench.log 2>&1; echo "bench rc $?"
grep -E "^bench: kiln" $OUT/bench.log
