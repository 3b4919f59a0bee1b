# Session 7, call 2: does the host's enqueue bound a run at 10K x 128 x 256
# (probe: enqueue time against the run's total), and which kernel is fastest there.
set -u
(cd .gpu/s7 && python3 -c "import tarfile; tarfile.open('probe.tar.xz').extractall()")
D=/tmp/kinds; P=.gpu/s7/probe/apps
python3 .gpu/gen.py $D normal:10000:128 normal:100000:128 >/dev/null
f=$D/normal/x_10000_128.npy
for rep in 1 2; do KILN_PROBE=1 $P anneal --npy $f --m 256 --iters 30 --tol 0 --backend cuda 2>&1 | grep -E "PROBE|time:"; done
for t in auto 64 128 wgmma; do for rep in 1 2 3; do
 if [ $t = auto ]; then E=""; else E="KILN_ANNEAL_TC_TILE=$t"; fi
 echo "TILE $t $(env $E KILN_PROBE=1 $P anneal --npy $f --m 256 --iters 30 --tol 0 --backend cuda 2>&1 | grep -E 'time:' | grep -oE 'iterations [0-9.]+ ms in')"
done; done
for rep in 1 2 3; do echo "SIMT $(KILN_ANNEAL_TC=0 $P anneal --npy $f --m 256 --iters 30 --tol 0 --backend cuda 2>&1 | grep -E 'time:' | grep -oE 'iterations [0-9.]+ ms in')"; done
f=$D/normal/x_100000_128.npy
KILN_PROBE=1 $P anneal --npy $f --m 1024 --iters 30 --tol 0 --backend cuda 2>&1 | grep -E "PROBE|time:"
