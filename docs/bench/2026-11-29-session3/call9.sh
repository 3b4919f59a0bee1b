# Third session of 2026-11-29, call 9: the encode's default chunk at 32 MiB
# (d32, this session's last build) beside 64 MiB (new, call 7's build) and
# d32 at 16 MiB chunks, encode_anchor.py and the read rate, 4 x 1M x 768 f32.
set -u
(cd .gpu && python3 -c "import tarfile; tarfile.open('new.tar.xz').extractall(); tarfile.open('d32.tar.xz').extractall()")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/enc
python3 .gpu/encgen.py $D 4 1000000 768 >/dev/null
X="$D/x0.npy $D/x1.npy $D/x2.npy $D/x3.npy"
.gpu/d32/apps anneal --npy $D/x0.npy --m 4422 --iters 2 --tol 0 --backend cuda --out $D/idx 2>&1 | tail -1
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
  for v in "d32 -" "new -" "d32 5461"; do
    set -- $v; B=.gpu/$1/apps; C=""; [ "$2" != "-" ] && C="--chunk $2"
    echo "ENC $1 chunk=$2 $rep $( /usr/bin/time -f 'rss %M KB' $B encode $D/idx --npy $X --out $D/$1.npy --force --backend cuda $C 2>&1 | grep -E 'points in|stages|rss' | tr '\n' ' ')"
  done
done
python3 .gpu/anchors/encode_anchor.py $D/idx/anchors.npy $X 2>&1 | tail -1
cmp $D/d32.npy $D/new.npy && echo "d32 and new: the same bytes"
rates $X
