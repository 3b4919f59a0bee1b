# Sums an ncu --csv per-launch table (gpu__time_duration.sum) by kernel name.
# (Call 2 ran it without the short unit names: ncu said "ns", read as µs, so
# the "ms" column of call2-prof.log reads µs.)
import sys, csv, collections
rows = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
head = rows[0]; k = head.index("Kernel Name"); v = head.index("Metric Value"); u = head.index("Metric Unit")
tot = collections.defaultdict(float); cnt = collections.Counter()
for r in rows[1:]:
    val = float(r[v].replace(",", "")); val *= {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1, "us": 1, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}.get(r[u], 1)
    name = r[k].split("(")[0][:60]; tot[name] += val; cnt[name] += 1
all_ = sum(tot.values())
print(f"PROF {sys.argv[2]}: {sum(cnt.values())} launches, {all_/1e3:.2f} ms of kernels")
for name, t in sorted(tot.items(), key=lambda x: -x[1])[:12]:
    print(f"PROF {sys.argv[2]}   {t/1e3:8.3f} ms {cnt[name]:5d}x  {name}")
