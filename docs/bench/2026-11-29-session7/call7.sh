# Session 7, call 7: where a 10K x 128 x 256 iteration's GPU time goes at
# the clocks it runs at (probe build of daf3f38: a CUDA event after each
# operation; each figure is from the event before, gaps included).
set -u
(cd .gpu/s7 && python3 -c "import tarfile; tarfile.open('ev.tar.xz').extractall()")
D=/tmp/kinds; P=.gpu/s7/ev/apps
python3 .gpu/gen.py $D normal:10000:128 normal:1000000:128 >/dev/null
for rep in 1 2; do KILN_PROBE_EVENTS=1 $P anneal --npy $D/normal/x_10000_128.npy --m 256 --iters 30 --tol 0 --backend cuda 2>&1 | grep -E "PROBE|time:" | tail -16; done
for rep in 1 2; do $P anneal --npy $D/normal/x_10000_128.npy --m 256 --iters 30 --tol 0 --backend cuda 2>&1 | grep -E "time:"; done
KILN_PROBE_EVENTS=1 $P anneal --npy $D/normal/x_1000000_128.npy --m 2048 --iters 10 --tol 0 --backend cuda 2>&1 | grep -E "PROBE|time:" | tail -16
