# Sums ncu --csv gpu__time_duration.sum rows per kernel name (stdin): calls, total ms, share.
import csv, sys, collections
rows = [r for r in csv.reader(l for l in sys.stdin if l.startswith('"'))]
hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value"); ui = hdr.index("Metric Unit")
tot = collections.defaultdict(float); cnt = collections.Counter()
for r in rows[1:]:
    v = float(r[vi].replace(",", "")); u = r[ui]
    ms = v / 1e6 if u == "ns" else v / 1e3 if u in ("us", "usecond") else v if u in ("ms", "msecond") else v / 1e6
    name = r[ki].split("(")[0][:60]; tot[name] += ms; cnt[name] += 1
s = sum(tot.values())
for k, v in sorted(tot.items(), key=lambda kv: -kv[1]):
    print(f"{k:<60} {cnt[k]:>5} {v:10.3f} ms {100*v/s:5.1f}%")
print(f"{'total':<60} {sum(cnt.values()):>5} {s:10.3f} ms")
