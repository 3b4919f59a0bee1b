# Issue 40: stages of the new encode (bit-compare check, index checked once),
# f16 and bf16, the anchor, and the anneal's upload: stager vs registration.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/enc; A=.gpu/anchors; OLD=.gpu/d/apps; NEW=.gpu/n/apps
rss() { python3 -c "import resource,subprocess,sys,time; t=time.time(); r=subprocess.run(sys.argv[1:],capture_output=True,text=True); print('\n'.join(r.stdout.strip().splitlines()[-2:]) if r.stdout.strip() else r.stderr[-300:]); print('   rc',r.returncode,'maxrss_MB',resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss//1024,'wall_s',round(time.time()-t,2))" "$@"; }
python3 .gpu/encgen.py $D 4 1000000 768 --f16 >/dev/null
python3 -c "
import numpy as np
try:
    import ml_dtypes
    for i in range(4):
        x=np.load('$D/x%d.npy'%i); np.save('$D/b%d.npy'%i, x.astype(ml_dtypes.bfloat16))
    print('bf16 written')
except Exception as e: print('no bf16:', e)
"
X="$D/x0.npy $D/x1.npy $D/x2.npy $D/x3.npy"; H="$D/h0.npy $D/h1.npy $D/h2.npy $D/h3.npy"; B="$D/b0.npy $D/b1.npy $D/b2.npy $D/b3.npy"
$NEW anneal --npy $D/x0.npy --m 4422 --iters 2 --tol 0 --backend cuda --out $D/idx 2>&1 | tail -1
cat $X $H > /dev/null; ls $D/b0.npy >/dev/null 2>&1 && cat $B > /dev/null
echo "== setup 1M x 768 x 4096: stager, registration, stager, registration, old"
for v in "" 1 "" 1; do echo "register=$v $(KILN_UPLOAD_REGISTER=$v $NEW anneal --npy $D/x0.npy --m 4096 --iters 10 --tol 0 --backend cuda 2>&1 | grep -E '^whole run')"; done
echo "old $($OLD anneal --npy $D/x0.npy --m 4096 --iters 10 --tol 0 --backend cuda 2>&1 | grep -E '^whole run')"
echo "== encode f32"
for rep in 1 2 3; do
  echo "new default:"; rss $NEW encode $D/idx --npy $X --out $D/new.npy --force --backend cuda
  python3 $A/encode_anchor.py $D/idx/anchors.npy $X --out $D/torch.npy 2>&1 | tail -1
done
for c in 21845 65536 131072; do echo "new --chunk $c:"; rss $NEW encode $D/idx --npy $X --out $D/new_$c.npy --force --chunk $c --backend cuda; done
echo "== f16, bf16"
for rep in 1 2; do echo "f16:"; rss $NEW encode $D/idx --npy $H --out $D/newh.npy --force --backend cuda; done
ls $D/b0.npy >/dev/null 2>&1 && for rep in 1 2; do echo "bf16:"; rss $NEW encode $D/idx --npy $B --out $D/newb.npy --force --backend cuda; done
$OLD encode $D/idx --npy $X --out $D/old.npy --force --backend cuda --chunk 500000 | tail -1
python3 -c "
import numpy as np
D='$D'; o=np.load(D+'/old.npy'); n=np.load(D+'/new.npy')
print('new == old', np.array_equal(o,n), [np.array_equal(np.load(D+'/new_%d.npy'%c), o) for c in (21845,65536,131072)])
"
KILN_REQUIRE_GPU=1 .gpu/n/t_encode_gpu 2>&1 | grep -E "^test result|panicked"
KILN_REQUIRE_GPU=1 .gpu/n/t_lib chunks encode upload npy input 2>&1 | grep -E "^test result|FAILED|panicked" | head
