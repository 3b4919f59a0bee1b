# Session 6, call 7: the committed wide-lists code's assign_tc and anneal
# GPU tests (with the new test of a list that holds more than it keeps).
set -u
(cd .gpu/s6 && python3 -c "import tarfile; tarfile.open('w16f.tar.xz').extractall()")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in .gpu/s6/w16f/t_*; do echo "== $t"; KILN_REQUIRE_GPU=1 timeout 100 $t --nocapture 2>&1 | grep -E "^test |result|panicked|not run" | head -20; done 2>&1 | tee $OUT/tests.log
D=/tmp/kinds; python3 .gpu/gen.py $D offset:1000000:768 >/dev/null
for rep in 1 2; do echo "R7 offset 1000000x768x4096 $rep $(.gpu/s6/w16f/apps anneal --npy $D/offset/x_1000000_768.npy --m 4096 --iters 10 --tol 0 --backend cuda 2>&1 | grep -oE 'iterations [0-9.]+ ms')"; done | tee $OUT/r7.log
