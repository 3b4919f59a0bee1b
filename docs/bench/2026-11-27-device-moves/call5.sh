#!/usr/bin/env bash
# issue 28, call 5: the bundle's run.sh bench with the k-means anchors beside it (xtask bench
# --kmeans-anchors, never run on a GPU before), compute-sanitizer on the new kernels, and ncu's
# per-kernel times of a few iterations.
cd "$(dirname "$0")"
here=$PWD
set -o pipefail
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
tar xJf ../../target/gpu-bundle.tar.xz -C /tmp
cp -r ../c4/anchors/kmeans_anchors.py ../c4/anchors/flash-kmeans ../c4/anchors/torch_anchor.py /tmp/gpu-bundle/
cd /tmp/gpu-bundle
for t in memcheck racecheck initcheck synccheck; do
  timeout 120 compute-sanitizer --tool $t --error-exitcode 99 ./bin/anneal__anneal anchors_moved --test-threads=1 > $OUT/san_moves_$t.txt 2>&1; echo "SAN moves $t rc=$? $(tail -1 $OUT/san_moves_$t.txt)"
done
for t in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $t --error-exitcode 99 ./bin/anneal__assign_tc chunked_wgmma --test-threads=1 > $OUT/san_chunked_$t.txt 2>&1; echo "SAN chunked $t rc=$? $(tail -1 $OUT/san_chunked_$t.txt)"
done
python3 $here/gen.py /tmp/pts 50000,2048 100000,4096 1000000,128 >/dev/null 2>&1
for s in 50000,2048,256 100000,4096,1024 1000000,128,2048; do IFS=, read n d k <<<"$s"
  timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum --csv ./bin/apps anneal --npy /tmp/pts/x_${n}_${d}.npy --m $k --iters 3 --tol 0 --backend cuda > $OUT/ncu_$s.csv 2>/dev/null
  echo "NCU $s rc=$?"
  python3 - $OUT/ncu_$s.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; k = hdr.index("Kernel Name"); v = hdr.index("Metric Value"); u = hdr.index("Metric Unit")
tot = collections.defaultdict(float); cnt = collections.Counter()
for r in rows[1:]:
    try: x = float(r[v].replace(",", ""))
    except ValueError: continue
    x = x / 1e3 if r[u] == "nsecond" else (x if r[u] == "usecond" else x * 1e3)
    name = r[k].split("(")[0][:60]; tot[name] += x; cnt[name] += 1
for name, t in sorted(tot.items(), key=lambda a: -a[1])[:14]:
    print(f"  {t/1e3:9.3f} ms  {cnt[name]:4d}x  {name}")
PY
done
timeout 480 bash run.sh bench > $OUT/bench.log 2>&1; echo "BENCH rc=$?"; tail -25 $OUT/bench.log; ls $OUT/bench 2>/dev/null; cat $OUT/bench/kmeans.md 2>/dev/null
echo "ELAPSED $SECONDS s"
