# Session 5, call 9: the upload reading a mapped input from its file
# (pread into the stager's page-locked buffers) against copying out of the
# map (base = the gpu-bundle's apps, b254bec); setup at 1M x 768 x 4096,
# f32 and f16, same outputs; the anneal GPU tests (the mapped upload's
# among them) and the upload tests under compute-sanitizer.
(cd .gpu && python3 -c "import tarfile; tarfile.open('p9.tar.xz').extractall()")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds; python3 .gpu/gen.py $D normal:1000000:768 >/dev/null
python3 -c "import numpy as np; np.save('/tmp/h768.npy', np.load('$D/normal/x_1000000_768.npy').astype(np.float16))"
f=$D/normal/x_1000000_768.npy; cat $f /tmp/h768.npy >/dev/null
for rep in 1 2 3 4; do for x in $f /tmp/h768.npy; do for b in base new; do B=.gpu/p9/apps; [ $b = base ] && B=.gpu/p9/base/apps
  echo "SETUP $b $(basename $x) $rep $($B anneal --npy $x --m 4096 --iters 10 --tol 0 --backend cuda --out /tmp/o_$b --force 2>&1 | grep -E '^whole run')"
done; cmp /tmp/o_base/assignments.npy /tmp/o_new/assignments.npy && cmp /tmp/o_base/anchors.npy /tmp/o_new/anchors.npy && echo "SAME $(basename $x) $rep"; done; done 2>&1 | tee $OUT/setup.log
for t in .gpu/p9/t_*; do echo "== $t"; KILN_REQUIRE_GPU=1 timeout 120 $t 2>&1 | grep -E "^test result|panicked|FAILED" -A2 | head -8; done 2>&1 | tee $OUT/tests.log
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck synccheck; do echo "== sanitizer $tool"; KILN_REQUIRE_GPU=1 timeout 120 $CS --tool $tool .gpu/p9/t_kiln_anneal gpu::upload 2>&1 | grep -E "ERROR SUMMARY|test result|RACECHECK SUMMARY" ; done 2>&1 | tee $OUT/sanitizer.log
