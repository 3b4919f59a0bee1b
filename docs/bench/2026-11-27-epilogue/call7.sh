#!/usr/bin/env bash
# issue 28, session 29 call 7: the GPU suite on this session's bundle, then the whole anneal of
# the previous build (bin-old) and this one (bin-new) interleaved, beside all five anchor modes
# on the same points, then ncu's per-kernel times of 30 iterations at 10K x 128 x 256.
cd "$(dirname "$0")"
here=$PWD
set -o pipefail
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
for f in ../../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
tar xJf ../../target/gpu-bundle.tar.xz -C /tmp && mkdir -p bin-new bin-old && cp /tmp/gpu-bundle/bin/apps bin-new/apps && xz -dc apps-old.xz > bin-old/apps && chmod +x bin-old/apps
(cd /tmp/gpu-bundle && bash run.sh tests > $OUT/suite.log 2>&1; echo "SUITE rc=$?"; grep -E "^<== .*FAIL|gpu-bundle:" $OUT/suite.log; grep -E "the host's bits|listed: plain|identical" $OUT/suite.log | head)
SH="10000,128,256 1000000,128,2048 100000,384,1024 100000,768,1024 100000,1536,1024 1000000,768,4096 100000,4096,1024 50000,2048,256"
SHAPES="$SH" REPS=2 ./bench.sh old@auto new@auto 2>&1
SHAPES="10000,128,256" ITERS=30 REPS=3 ./bench.sh old@auto new@auto 2>&1
PYTHONPATH=anchors/flash-kmeans python3 anchors/kmeans_anchors.py $SH 10000,128,256,30 --npy /tmp/pts 2>&1
for b in old new; do
  ncu --clock-control none --metrics gpu__time_duration.sum --csv ./bin-$b/apps anneal --npy /tmp/pts/x_10000_128.npy --m 256 --iters 30 --tol 0 --backend cuda > /tmp/n_$b.csv 2>/dev/null
  echo "NCU $b 10K x 128 x 256 x 30 rc=$?"
  python3 - /tmp/n_$b.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; k = hdr.index("Kernel Name"); v = hdr.index("Metric Value"); u = hdr.index("Metric Unit")
scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
tot = collections.defaultdict(float); cnt = collections.Counter(); s = 0
for r in rows[1:]:
    try: x = float(r[v].replace(",", "")) * scale[r[u]]
    except (ValueError, KeyError): continue
    name = r[k].split("(")[0][:60]; tot[name] += x; cnt[name] += 1; s += x
print(f"  total {s:.1f} us in {sum(cnt.values())} launches")
for name, t in sorted(tot.items(), key=lambda a: -a[1])[:6]:
    print(f"  {t:10.1f} us  {cnt[name]:3d}x  {name}")
PY
done
echo "ELAPSED $SECONDS s"
