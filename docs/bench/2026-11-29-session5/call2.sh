# Session 5, call 2: the stager's small first buffer (s2) against main (d32)
# in the anneal's setup; s2's library GPU tests; per-kernel times (ncu) of
# the anneal at narrow d, wide, offset and small; the host's read rate alone
# and while the device copies, beside the encode.
set -u
(cd .gpu && python3 -c "import tarfile; [tarfile.open(f).extractall() for f in ('d32.tar.xz','s2.tar.xz')]")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
OLD=.gpu/d32/apps; NEW=.gpu/s2/apps; D=/tmp/kinds
python3 .gpu/gen.py $D normal:1000000:768 normal:1000000:128 normal:1000000:64 offset:1000000:768 normal:10000:128 >/dev/null
f=$D/normal/x_1000000_768.npy; cat $f >/dev/null
for rep in 1 2 3 4; do for b in OLD NEW; do eval B=\$$b
  echo "SETUP $b $rep $($B anneal --npy $f --m 4096 --iters 10 --tol 0 --backend cuda --out /tmp/s_$b --force 2>&1 | grep -E '^whole run')"
done; done 2>&1 | tee $OUT/setup.log
cmp /tmp/s_OLD/assignments.npy /tmp/s_NEW/assignments.npy && echo "SAME setup outputs"
KILN_REQUIRE_GPU=1 timeout 100 .gpu/s2/t_kiln_anneal 2>&1 | grep -E "^test result|panicked|FAILED" | tee $OUT/tests.log
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for s in normal:1000000:128:2048:3 normal:1000000:64:2048:3 normal:1000000:768:4096:3 offset:1000000:768:4096:6 normal:10000:128:256:30; do
  IFS=: read kind n d m it <<<"$s"; x=$D/$kind/x_${n}_${d}.npy
  echo "TIME $kind ${n}x${d}x${m} it$it $($NEW anneal --npy $x --m $m --iters $it --tol 0 --backend cuda 2>&1 | grep -E '^whole run')"
  timeout 120 $NCU --csv --metrics gpu__time_duration.sum $NEW anneal --npy $x --m $m --iters $it --tol 0 --backend cuda > /tmp/ncu.csv 2>/dev/null
  python3 .gpu/prof.py /tmp/ncu.csv "$kind ${n}x${d}x${m} it$it"
done 2>&1 | tee $OUT/prof.log
E=/tmp/enc; python3 .gpu/encgen.py $E 4 1000000 768 >/dev/null
X="$E/x0.npy $E/x1.npy $E/x2.npy $E/x3.npy"
$NEW anneal --npy $E/x0.npy --m 4422 --iters 2 --tol 0 --backend cuda --out $E/idx 2>&1 | tail -1
cat $X > /dev/null
python3 .gpu/bw.py $X 2>&1 | tee $OUT/bw.log
for rep in 1 2 3; do
  echo "ENC $rep $( /usr/bin/time -f 'rss %M KB' $NEW encode $E/idx --npy $X --out $E/o.npy --force --backend cuda 2>&1 | grep -E 'points in|stages|rss' | tr '\n' ' ')"
done 2>&1 | tee $OUT/enc.log
python3 .gpu/bw.py $X 2>&1 | tee -a $OUT/bw.log
python3 .gpu/anchors/encode_anchor.py $E/idx/anchors.npy $X 2>&1 | tail -1
