# Session 8, call 4: ncu's per-kernel durations (clocks as they run) over a
# whole 10K x 128 x 256 x 30 run of the probe build (a63e2d3's anneal).
set -u
(cd .gpu/s8 && python3 -c "import tarfile; tarfile.open('probe.tar.xz').extractall()")
D=/tmp/kinds; P=.gpu/s8/probe/apps
python3 .gpu/gen.py $D normal:10000:128 >/dev/null
f=$D/normal/x_10000_128.npy
timeout 250 ncu --clock-control none --metrics gpu__time_duration.sum --csv $P anneal --npy $f --m 256 --iters 30 --tol 0 --backend cuda > $OUT/ncu.csv 2>/dev/null; echo "ncu rc $?"
python3 .gpu/prof.py $OUT/ncu.csv new10k 2>&1 | tee $OUT/prof.log
python3 - $OUT/ncu.csv <<'PY'
import sys, csv
rows = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
h = rows[0]; k = h.index("Kernel Name"); v = h.index("Metric Value"); u = h.index("Metric Unit")
seq = [(r[k].split("(")[0][:28], float(r[v].replace(",",""))) for r in rows[1:]]
# one steady iteration: the launches between the 12th and 13th anneal_scan
idx = [i for i, (n, _) in enumerate(seq) if n.startswith("anneal_scan")]
a, b = idx[11], idx[12]
for n, t in seq[a:b]: print(f"ITER {n:28s} {t:10.0f} {rows[1][u]}")
PY
