# Session 8, call 3: where a 10K run's time goes now: the host's enqueue of
# each run of iterations against the run (probe build: a63e2d3's anneal with
# a timer around run_on_device's enqueue; measurement only).
set -u
(cd .gpu/s8 && python3 -c "import tarfile; tarfile.open('probe.tar.xz').extractall()")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds; P=.gpu/s8/probe/apps
python3 .gpu/gen.py $D normal:10000:128 normal:10000:768 >/dev/null
for s in normal:10000:128:256:30 normal:10000:768:256:30; do
  IFS=: read kind n d m it <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for rep in 1 2 3; do for E in KILN_X=1 KILN_ANNEAL_FUSE=off; do
    echo "R $kind ${n}x${d}x${m}x$it $E $rep"; env $E $P anneal --npy $f --m $m --iters $it --tol 0 --backend cuda 2>&1 | grep -E "PROBE|time:" | sed 's/^/   /'
  done; done
done 2>&1 | tee $OUT/probe.log
