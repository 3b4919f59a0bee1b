# Issue 42's void*/bool/fp8 launches on the GPU (gpu-core backends, candle-patterns),
# and issue 40's encode beside the files' read rate into memory that is kept.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; pwd
echo "== gpu-core backends"; KILN_REQUIRE_GPU=1 .gpu/t/gc_backends 2>&1 | grep -E "^test .*(void|bool|untyped)|^test result|panicked|FAILED"
for t in candle_patterns image markers moe by_name; do echo "== candle-patterns $t"; (cd examples/candle-patterns && KILN_REQUIRE_GPU=1 timeout 120 ../../.gpu/t/cp_$t 2>&1 | grep -E "^test .*(quantized|fp8|bool|void)|^test result|panicked|FAILED|skipped" | head -20); done
D=/tmp/enc; NEW=.gpu/n/apps; A=.gpu/anchors
python3 .gpu/encgen.py $D 4 1000000 768 >/dev/null
X="$D/x0.npy $D/x1.npy $D/x2.npy $D/x3.npy"
$NEW anneal --npy $D/x0.npy --m 4422 --iters 2 --tol 0 --backend cuda --out $D/idx 2>&1 | tail -1
cat $X > /dev/null
rates() { python3 - "$@" <<'PY'
import sys, time, os
from concurrent.futures import ThreadPoolExecutor
fs = sys.argv[1:]; tot = sum(os.path.getsize(f) for f in fs)
P = 8 << 20
jobs = [(f, o, min(P, os.path.getsize(f) - o)) for f in fs for o in range(0, os.path.getsize(f), P)]
import threading
local = threading.local()
def reused(a):
    f, off, ln = a
    if not hasattr(local, "b"): local.b = bytearray(P)
    fd = os.open(f, os.O_RDONLY); os.preadv(fd, [memoryview(local.b)[:ln]], off); os.close(fd)
big = bytearray(tot); mv = memoryview(big); starts = {}; at = 0
for f in fs: starts[f] = at; at += os.path.getsize(f)
def kept(a):
    f, off, ln = a
    fd = os.open(f, os.O_RDONLY); os.preadv(fd, [mv[starts[f] + off: starts[f] + off + ln]], off); os.close(fd)
for name, fn in (("into reused 8 MiB buffers", reused), ("into one buffer kept whole", kept), ("into reused 8 MiB buffers", reused), ("into one buffer kept whole", kept)):
    t = time.time()
    with ThreadPoolExecutor(16) as ex: list(ex.map(fn, jobs))
    print("read 16 threads", name, "GB/s", round(tot / (time.time() - t) / 1e9, 2))
PY
}
rates $X
for rep in 1 2 3; do $NEW encode $D/idx --npy $X --out $D/new.npy --force --backend cuda 2>/dev/null | tail -2; python3 $A/encode_anchor.py $D/idx/anchors.npy $X 2>&1 | tail -1; done
rates $X
