# Session 7, call 1: where 30 iterations of 10K x 128 x 256 go (main's build):
# the runs' phases, ncu's per-kernel durations, nsys's timeline if present.
set -u
(cd .gpu/s7 && python3 -c "import tarfile; tarfile.open('base.tar.xz').extractall()")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds; B=.gpu/s7/base/apps
python3 .gpu/gen.py $D normal:10000:128 offset:10000:128 embed:10000:128 >/dev/null
for kind in normal offset embed; do f=$D/$kind/x_10000_128.npy
  for rep in 1 2 3 4; do echo "RUN $kind $rep $($B anneal --npy $f --m 256 --iters 30 --tol 0 --backend cuda 2>&1 | grep -E 'whole run|time:' | tr '\n' ' ')"; done
done
f=$D/normal/x_10000_128.npy
ncu --metrics gpu__time_duration.sum --csv $B anneal --npy $f --m 256 --iters 30 --tol 0 --backend cuda > $OUT/ncu.csv 2>/dev/null; python3 .gpu/prof.py $OUT/ncu.csv normal10k
which nsys && { nsys profile -t cuda -o $OUT/ns $B anneal --npy $f --m 256 --iters 30 --tol 0 --backend cuda >/dev/null 2>&1; nsys stats -r cuda_gpu_trace -f csv -o $OUT/trace $OUT/ns.nsys-rep >/dev/null 2>&1; ls $OUT; }
ls /usr/local/cuda/bin | tr '\n' ' '
