# Session 5, call 7: the stager's shape, 1M x 768 x 4096 setup, f32 and
# f16: va = HEAD (4 MiB first buffer, three 16 MiB locked on threads, 64
# pieces a buffer); vb = three 16 MiB locked before the first copy; vc =
# six whole buffers; vd = 16 pieces a buffer (1 MiB); ve = vc + vd.
(cd .gpu && python3 -c "import tarfile; tarfile.open('vs.tar.xz').extractall()")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds; python3 .gpu/gen.py $D normal:1000000:768 >/dev/null
python3 -c "import numpy as np; np.save('/tmp/h768.npy', np.load('$D/normal/x_1000000_768.npy').astype(np.float16))"
f=$D/normal/x_1000000_768.npy; cat $f /tmp/h768.npy >/dev/null
for rep in 1 2 3 4; do for x in $f /tmp/h768.npy; do for b in va vb vc vd ve; do
  echo "SETUP $b $(basename $x) $rep $(.gpu/vs/$b anneal --npy $x --m 4096 --iters 2 --tol 0 --backend cuda 2>&1 | grep -oE 'setup [0-9.]+ ms|upload [0-9.]+ ms' | tr '\n' ' ')"
done; done; done 2>&1 | tee $OUT/setup.log | sort -k2,3 | awk '{print}'
