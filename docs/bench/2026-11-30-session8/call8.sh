# Session 8, call 8: the final build (the list kernel's m = 0 fix after
# d337530): the assign_tc tests, the whole GPU suite (Vulkan loader
# carried), and the quick k-means bench beside the anchors.
set -u
tar xJf target/gpu-bundle.tar.xz -C /tmp
cp -r .gpu/anchors/* /tmp/gpu-bundle/
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cd /tmp/gpu-bundle
KILN_REQUIRE_GPU=1 timeout 100 ./bin/anneal__assign_tc > $OUT/t_assign_tc.log 2>&1; echo "assign_tc rc=$?"; grep -E "^test result|panicked" $OUT/t_assign_tc.log
timeout 180 ./bin/xtask bench --apps bin/apps --kmeans-anchors kmeans_anchors.py --quick --kinds normal,offset,embedding --out $OUT/bench > $OUT/bench.log 2>&1; echo "bench rc $?"
python3 - $OUT/bench/bench.json <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
for kind in b['kmeans']:
    for r in kind['rows']:
        best = [a['ms'] for a in r['anchors'] if a['mode'] == r['best_anchor']][0]
        print("KM", kind['kind'], r['shape'], r['kiln_ms'], r['best_anchor'], best, round(r['kiln_speed_over_best'], 2), r['kiln_list_share'])
PY
rm -f $OUT/bench/speedup.svg $OUT/bench/apps.json
timeout 330 bash run.sh tests > $OUT/suite.log 2>&1; echo "suite rc $?"; grep -E "^<== |gpu-bundle:" $OUT/suite.log | grep -v ": pass" | tail -8; tail -2 $OUT/suite.log
