# Issue 40: encode through page-locked buffers (new) beside the last build (old)
# and encode_anchor.py on 4 x 1M x 768 f32, one H200; the anneal's setup.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nproc
D=/tmp/enc; A=.gpu/anchors; OLD=.gpu/d/apps; NEW=.gpu/n/apps
rss() { python3 -c "import resource,subprocess,sys,time; t=time.time(); r=subprocess.run(sys.argv[1:],capture_output=True,text=True); print(r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr[-300:]); print('   rc',r.returncode,'maxrss_MB',resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss//1024,'wall_s',round(time.time()-t,2))" "$@"; }
python3 .gpu/encgen.py $D 4 1000000 768 --f16 >/dev/null
X="$D/x0.npy $D/x1.npy $D/x2.npy $D/x3.npy"; H="$D/h0.npy $D/h1.npy $D/h2.npy $D/h3.npy"
echo "== index"; $NEW anneal --npy $D/x0.npy --m 4422 --iters 2 --tol 0 --backend cuda --out $D/idx 2>&1 | tail -2
python3 -c "import numpy as np; a=np.load('$D/idx/anchors.npy'); print('anchors', a.shape)"
echo "== setup 1M x 768 x 4096 (old, new, old, new)"
for b in $OLD $NEW $OLD $NEW; do echo "$b $($b anneal --npy $D/x0.npy --m 4096 --iters 10 --tol 0 --backend cuda 2>&1 | grep -E '^whole run')"; done
echo "== read rates (page cache)"
cat $X > /dev/null
python3 - $X <<'PY'
import sys, time, os
from concurrent.futures import ThreadPoolExecutor
fs = sys.argv[1:]; tot = sum(os.path.getsize(f) for f in fs)
t = time.time()
for f in fs:
    with open(f, 'rb', buffering=0) as h:
        b = bytearray(64 << 20); m = memoryview(b)
        while h.readinto(m): pass
print("read 1 thread GB/s", round(tot / (time.time() - t) / 1e9, 2))
def part(a):
    f, off, ln = a
    fd = os.open(f, os.O_RDONLY); b = bytearray(8 << 20); m = memoryview(b); done = 0
    while done < ln:
        k = os.preadv(fd, [m[:min(len(b), ln - done)]], off + done); done += k
        if k == 0: break
    os.close(fd)
jobs = [(f, o, min(8 << 26, os.path.getsize(f) - o)) for f in fs for o in range(0, os.path.getsize(f), 8 << 26)]
t = time.time()
with ThreadPoolExecutor(16) as ex: list(ex.map(part, jobs))
print("read 16 threads GB/s", round(tot / (time.time() - t) / 1e9, 2))
PY
echo "== encode f32 (4 x 1M x 768)"
for rep in 1 2; do
  echo "old default:"; rss $OLD encode $D/idx --npy $X --out $D/old.npy --force --backend cuda
  echo "new default:"; rss $NEW encode $D/idx --npy $X --out $D/new.npy --force --backend cuda
  PYTHONPATH=$A python3 $A/encode_anchor.py $D/idx/anchors.npy $X --out $D/torch.npy 2>&1 | tail -1
done
for c in 32768 65536 131072 262144 1000000; do echo "new --chunk $c:"; rss $NEW encode $D/idx --npy $X --out $D/new_$c.npy --force --chunk $c --backend cuda; done
echo "== f16 (same points)"
for rep in 1 2; do echo "new f16 default:"; rss $NEW encode $D/idx --npy $H --out $D/newh.npy --force --backend cuda; done
echo "== agreement"
python3 - $D <<'PY'
import sys, numpy as np
D = sys.argv[1]; o = np.load(f"{D}/old.npy"); n = np.load(f"{D}/new.npy"); t = np.load(f"{D}/torch.npy")
print("new == old:", np.array_equal(o, n), "points", len(n))
for c in (32768, 65536, 131072, 262144, 1000000): print("chunk", c, "== old:", np.array_equal(np.load(f"{D}/new_{c}.npy"), o))
print("torch (tf32) agrees on", round(float((t == n).mean()), 5))
PY
echo "== GPU tests"
KILN_REQUIRE_GPU=1 .gpu/n/t_encode_gpu 2>&1 | grep -E "^test |^test result|panicked" | head -30
KILN_REQUIRE_GPU=1 .gpu/n/t_lib chunks encode upload npy 2>&1 | grep -E "^test result|FAILED|panicked" | head -20
