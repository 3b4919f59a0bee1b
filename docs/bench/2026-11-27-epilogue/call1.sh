#!/usr/bin/env bash
# issue 28, session 29 call 1: where the time goes. 10K x 128 x 256 x 30 (launch-bound),
# 1M x 128 x 2048 (kernel breakdown), ncu sections of the wgmma kernel at d = 128 and 768.
cd "$(dirname "$0")"
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
which nsys ncu; ls /usr/local/cuda/bin | tr '\n' ' '; echo
for f in ../../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
tar xJf ../../target/gpu-bundle.tar.xz -C /tmp && mkdir -p bin-a && cp /tmp/gpu-bundle/bin/apps bin-a/apps
python3 gen.py /tmp/pts 10000,128 1000000,128 1000000,768
A=./bin-a/apps
sum() { python3 - "$1" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; k = hdr.index("Kernel Name"); v = hdr.index("Metric Value"); u = hdr.index("Metric Unit")
scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
tot = collections.defaultdict(float); cnt = collections.Counter(); all_ = 0
for r in rows[1:]:
    try: x = float(r[v].replace(",", "")) * scale[r[u]]
    except (ValueError, KeyError): continue
    name = r[k].split("(")[0][:60]; tot[name] += x; cnt[name] += 1; all_ += x
print(f"  total {all_:.1f} us in {sum(cnt.values())} launches")
for name, t in sorted(tot.items(), key=lambda a: -a[1])[:25]:
    print(f"  {t:10.1f} us  {cnt[name]:4d}x  {name}")
PY
}
for i in 1 2 3; do $A anneal --npy /tmp/pts/x_10000_128.npy --m 256 --iters 30 --tol 0 --backend cuda 2>&1 | grep -E "time:|^cuda"; done
ncu --clock-control none --metrics gpu__time_duration.sum --csv $A anneal --npy /tmp/pts/x_10000_128.npy --m 256 --iters 30 --tol 0 --backend cuda > /tmp/n1.csv 2>/dev/null; echo "NCU 10K x30 rc=$?"; sum /tmp/n1.csv
if which nsys >/dev/null; then
  nsys profile -o /tmp/p10k -t cuda --force-overwrite true $A anneal --npy /tmp/pts/x_10000_128.npy --m 256 --iters 30 --tol 0 --backend cuda > /dev/null 2>&1
  nsys stats -r cuda_api_sum,cuda_gpu_kern_sum /tmp/p10k.nsys-rep 2>&1 | head -70
  nsys stats -r cuda_gpu_trace -f csv /tmp/p10k.nsys-rep > $OUT/trace10k.csv 2>/dev/null
fi
for i in 1 2; do $A anneal --npy /tmp/pts/x_1000000_128.npy --m 2048 --iters 10 --tol 0 --backend cuda 2>&1 | grep -E "time:|^cuda"; done
ncu --clock-control none --metrics gpu__time_duration.sum --csv $A anneal --npy /tmp/pts/x_1000000_128.npy --m 2048 --iters 3 --tol 0 --backend cuda > /tmp/n2.csv 2>/dev/null; echo "NCU 1M x128 rc=$?"; sum /tmp/n2.csv
for s in 1000000,128,2048 1000000,768,4096; do IFS=, read n d k <<<"$s"
  timeout 200 ncu --clock-control none -k regex:assign_wgmma --launch-skip 1 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats $A anneal --npy /tmp/pts/x_${n}_${d}.npy --m $k --iters 3 --tol 0 --backend cuda > $OUT/sections_${d}.txt 2>&1
  echo "SECTIONS $s rc=$?"; grep -E "Duration|Throughput|Busy|Pipe|Issue|Eligible|Warp Cycles|Hit Rate|Bandwidth|Registers|Shared Memory Config|Stall|Achieved" $OUT/sections_${d}.txt | head -60
done
echo "ELAPSED $SECONDS s"
