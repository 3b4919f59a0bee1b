# Issue 40, the record: encode (4 x 1M x 768 f32, and f16) beside encode_anchor.py
# and the machine's limits; the anneal's setup; a killed encode; then the bench itself.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/enc; A=.gpu/anchors; OLD=.gpu/d/apps; NEW=.gpu/n/apps
rss() { python3 -c "import resource,subprocess,sys,time; t=time.time(); r=subprocess.run(sys.argv[1:],capture_output=True,text=True); print('\n'.join(r.stdout.strip().splitlines()[-2:]) if r.stdout.strip() else r.stderr[-300:]); print('   rc',r.returncode,'maxrss_MB',resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss//1024,'wall_s',round(time.time()-t,2))" "$@"; }
python3 .gpu/encgen.py $D 4 1000000 768 --f16 >/dev/null
X="$D/x0.npy $D/x1.npy $D/x2.npy $D/x3.npy"; H="$D/h0.npy $D/h1.npy $D/h2.npy $D/h3.npy"
$NEW anneal --npy $D/x0.npy --m 4422 --iters 2 --tol 0 --backend cuda --out $D/idx 2>&1 | tail -1
cat $X $H > /dev/null
readrate() { python3 - "$@" <<'PY'
import sys, time, os
from concurrent.futures import ThreadPoolExecutor
fs = sys.argv[1:]; tot = sum(os.path.getsize(f) for f in fs)
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
}
echo "== setup 1M x 768 x 4096 (x3)"
for b in $NEW $NEW $NEW; do echo "$b $($b anneal --npy $D/x0.npy --m 4096 --iters 10 --tol 0 --backend cuda 2>&1 | grep -E '^whole run')"; done
echo "== encode f32"
for rep in 1 2 3; do
  readrate $X
  echo "default:"; rss $NEW encode $D/idx --npy $X --out $D/new.npy --force --backend cuda
  python3 $A/encode_anchor.py $D/idx/anchors.npy $X --out $D/torch.npy 2>&1 | tail -1
done
for c in 10922 43690 87381; do echo "--chunk $c:"; rss $NEW encode $D/idx --npy $X --out $D/new_$c.npy --force --chunk $c --backend cuda; done
echo "== f16"
for rep in 1 2; do echo "f16:"; rss $NEW encode $D/idx --npy $H --out $D/newh.npy --force --backend cuda; done
echo "== killed encode"
mkdir -p $D/k; ( $NEW encode $D/idx --npy $X --out $D/k/codes.npy --backend cuda >/dev/null 2>&1 & p=$!; sleep 0.6; kill -9 $p; wait $p 2>/dev/null ); echo "after kill: $(ls -A $D/k | tr '\n' ' ')"
$NEW encode $D/idx --npy $D/x0.npy --out $D/k/codes.npy --backend cuda 2>&1 | tail -1; echo "after rerun: $(ls -A $D/k | tr '\n' ' ')"
$NEW encode $D/idx --npy $X --out $D/old.npy --force --backend cuda --chunk 500000 | tail -1
python3 -c "
import numpy as np
D='$D'; o=np.load(D+'/old.npy'); n=np.load(D+'/new.npy')
print('default == 500000-point chunks', np.array_equal(o,n), [np.array_equal(np.load(D+'/new_%d.npy'%c), o) for c in (10922,43690,87381)])
"
KILN_REQUIRE_GPU=1 .gpu/n/t_encode_gpu 2>&1 | grep -E "^test result|panicked"
KILN_REQUIRE_GPU=1 .gpu/n/t_lib chunks encode upload npy input 2>&1 | grep -E "^test result|FAILED|panicked" | head
rm -rf $D
echo "== xtask bench --encode-anchor"
timeout 280 .gpu/n/xtask bench --apps $NEW --encode-anchor $A/encode_anchor.py --out $OUT/bench 2>&1 | grep -vE "^bench: writing" | tail -25
