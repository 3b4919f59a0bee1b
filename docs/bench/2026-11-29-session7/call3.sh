# Session 7, call 3: the cost of cudarc's per-argument event tracking on the
# host (probe build; KILN_PROBE_NOTRACK=1 turns tracking off for the context).
set -u
(cd .gpu/s7 && python3 -c "import tarfile; tarfile.open('nt.tar.xz').extractall()")
D=/tmp/kinds; P=.gpu/s7/nt/apps
python3 .gpu/gen.py $D normal:10000:128 normal:100000:128 >/dev/null
for shape in 10000:128:256 100000:128:1024; do IFS=: read n d m <<<"$shape"; f=$D/normal/x_${n}_${d}.npy
for rep in 1 2 3; do
 echo "TRACK $shape $(KILN_PROBE=1 $P anneal --npy $f --m $m --iters 30 --tol 0 --backend cuda --out /tmp/oa --force 2>&1 | grep -E 'PROBE|time:' | sed -n '3p;7p' | tr '\n' ' ')"
 echo "NOTRK $shape $(KILN_PROBE_NOTRACK=1 KILN_PROBE=1 $P anneal --npy $f --m $m --iters 30 --tol 0 --backend cuda --out /tmp/ob --force 2>&1 | grep -E 'PROBE|time:' | sed -n '3p;7p' | tr '\n' ' ')"
 cmp /tmp/oa/assignments.npy /tmp/ob/assignments.npy && cmp /tmp/oa/anchors.npy /tmp/ob/anchors.npy && echo SAME
done; done
