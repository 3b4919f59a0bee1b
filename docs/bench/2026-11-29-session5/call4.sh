# Session 5, call 4: the setup with the buffers allocated while the points
# upload on a thread (s4) against the stager's small first buffer alone
# (s3), f32 and f16, 1M x 768 x 4096; every anneal GPU test of s4, the
# staged upload under compute-sanitizer; the encode beside the read rate
# (alone and while the device copies) and encode_anchor.py.
set -u
(cd .gpu && python3 -c "import tarfile; [tarfile.open(f).extractall() for f in ('s3.tar.xz','s4.tar.xz')]")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds
python3 .gpu/gen.py $D normal:1000000:768 >/dev/null
python3 -c "import numpy as np; np.save('/tmp/h768.npy', np.load('$D/normal/x_1000000_768.npy').astype(np.float16))"
f=$D/normal/x_1000000_768.npy; cat $f /tmp/h768.npy >/dev/null
for rep in 1 2 3 4; do for x in $f /tmp/h768.npy; do for b in s3 s4; do
  echo "SETUP $b $(basename $x) $rep $(.gpu/$b/apps anneal --npy $x --m 4096 --iters 10 --tol 0 --backend cuda --out /tmp/o_$b --force 2>&1 | grep -E '^whole run')"
done; cmp /tmp/o_s3/assignments.npy /tmp/o_s4/assignments.npy && cmp /tmp/o_s3/anchors.npy /tmp/o_s4/anchors.npy && echo "SAME $(basename $x) $rep"; done; done 2>&1 | tee $OUT/setup.log
for t in .gpu/s4/t_*; do echo "== $t"; KILN_REQUIRE_GPU=1 timeout 120 $t 2>&1 | grep -E "^test result|panicked|FAILED" | head -8; done 2>&1 | tee $OUT/tests.log
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck synccheck; do echo "== sanitizer $tool"; KILN_REQUIRE_GPU=1 timeout 120 $CS --tool $tool .gpu/s4/t_kiln_anneal gpu::upload 2>&1 | grep -E "ERROR SUMMARY|test result|RACECHECK SUMMARY" ; done 2>&1 | tee $OUT/sanitizer.log
E=/tmp/enc; python3 .gpu/encgen.py $E 4 1000000 768 >/dev/null
X="$E/x0.npy $E/x1.npy $E/x2.npy $E/x3.npy"
.gpu/s4/apps anneal --npy $E/x0.npy --m 4422 --iters 2 --tol 0 --backend cuda --out $E/idx 2>&1 | tail -1
cat $X > /dev/null
python3 .gpu/bw.py $X 2>&1 | tee $OUT/bw.log
for rep in 1 2 3; do
  echo "ENC $rep $( /usr/bin/time -f 'rss %M KB' .gpu/s4/apps encode $E/idx --npy $X --out $E/o.npy --force --backend cuda 2>&1 | grep -E 'points in|stages|rss' | tr '\n' ' ')"
  python3 .gpu/anchors/encode_anchor.py $E/idx/anchors.npy $X 2>&1 | tail -1
done 2>&1 | tee $OUT/enc.log
python3 .gpu/bw.py $X 2>&1 | tee -a $OUT/bw.log
