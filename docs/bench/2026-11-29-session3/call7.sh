# Third session of 2026-11-29, one call: the anneal's GPU tests on this
# session's build (issue 38: the vocabulary floor, the rank session; issue 40:
# the small first page-locked buffer), then the encode of 4 x 1M x 768 f32
# (old = the second session's build, new = this one's) beside encode_anchor.py
# and the files' read rate, an encode of embedding-like points, and the
# anneal's speed old against new on two shapes.
set -u
(cd .gpu && python3 -c "import tarfile; tarfile.open('bins.tar.xz').extractall(); tarfile.open('new.tar.xz').extractall()")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in .gpu/new/t_*; do echo "== $t"; KILN_REQUIRE_GPU=1 timeout 120 $t 2>&1 | grep -E "^test result|panicked|FAILED|^test .*FAILED" | head -8; done
OLD=.gpu/after/apps; NEW=.gpu/new/apps; A=.gpu/anchors
D=/tmp/enc
python3 .gpu/encgen.py $D 4 1000000 768 >/dev/null
X="$D/x0.npy $D/x1.npy $D/x2.npy $D/x3.npy"
$NEW anneal --npy $D/x0.npy --m 4422 --iters 2 --tol 0 --backend cuda --out $D/idx 2>&1 | tail -1
cat $X > /dev/null
rates() { python3 - "$@" <<'PY'
import sys, time, os, threading
from concurrent.futures import ThreadPoolExecutor
fs = sys.argv[1:]; tot = sum(os.path.getsize(f) for f in fs)
P = 8 << 20
jobs = [(f, o, min(P, os.path.getsize(f) - o)) for f in fs for o in range(0, os.path.getsize(f), P)]
local = threading.local()
def reused(a):
    f, off, ln = a
    if not hasattr(local, "b"): local.b = bytearray(P)
    fd = os.open(f, os.O_RDONLY); os.preadv(fd, [memoryview(local.b)[:ln]], off); os.close(fd)
for rep in range(2):
    t = time.time()
    with ThreadPoolExecutor(16) as ex: list(ex.map(reused, jobs))
    print("read 16 threads into reused 8 MiB buffers GB/s", round(tot / (time.time() - t) / 1e9, 2))
PY
}
rates $X
for rep in 1 2 3; do
  for b in old new; do
    eval B=\$$(echo $b | tr a-z A-Z)
    echo "ENC $b $rep $( /usr/bin/time -f 'rss %M KB' $B encode $D/idx --npy $X --out $D/$b.npy --force --backend cuda 2>&1 | grep -E 'points in|stages|rss' | tr '\n' ' ')"
  done
  python3 $A/encode_anchor.py $D/idx/anchors.npy $X 2>&1 | tail -1
done
cmp $D/old.npy $D/new.npy && echo "old and new outputs: the same bytes"
rates $X
K=/tmp/kinds
python3 .gpu/gen.py $K embed:1000000:768 normal:1000000:768 offset:200000:128 >/dev/null
E=$K/embed/x_1000000_768.npy
$NEW anneal --npy $E --m 4096 --iters 2 --tol 0 --backend cuda --out $K/eidx 2>&1 | tail -1
cat $E > /dev/null
for rep in 1 2; do
  for b in old new; do
    eval B=\$$(echo $b | tr a-z A-Z)
    echo "EMB $b $rep $($B encode $K/eidx --npy $E --out $K/e$b.npy --force --backend cuda 2>&1 | grep -E 'points in|stages' | tr '\n' ' ')"
  done
  python3 $A/encode_anchor.py $K/eidx/anchors.npy $E 2>&1 | tail -1
done
cmp $K/eold.npy $K/enew.npy && echo "embed: old and new outputs the same bytes"
for s in normal:1000000:768:4096 offset:200000:128:16384; do
  IFS=: read kind n d m <<<"$s"; f=$K/$kind/x_${n}_${d}.npy
  for b in old new old new; do
    eval B=\$$(echo $b | tr a-z A-Z)
    o=$($B anneal --npy $f --m $m --iters 10 --tol 0 --backend cuda --seed 1 2>&1)
    echo "RESULT $kind ${n}x${d}x${m} $b $(grep -A1 -E '^backend ' <<<"$o" | tail -1 | tr -s ' ') | $(grep -E '^whole run' <<<"$o")"
  done
done
