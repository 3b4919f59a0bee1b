# Issue 38: kiln-anneal's own kernels on the GPU: every anneal GPU test, and the
# anneal's speed before (main before the move) and after, in the same call.
set -u
(cd .gpu && python3 -c "import tarfile; tarfile.open(\"bins.tar.xz\").extractall()")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in .gpu/after/t_*; do echo "== $t"; KILN_REQUIRE_GPU=1 timeout 300 $t 2>&1 | grep -E "^test result|panicked|FAILED|^test .*FAILED" | head -8; done
D=/tmp/kinds
python3 .gpu/gen.py $D normal:1000000:768 offset:1000000:768 normal:200000:128 >/dev/null
for s in normal:1000000:768:4096 offset:1000000:768:4096 normal:200000:128:16384; do
  IFS=: read kind n d m <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for b in before after before after; do
    o=$(.gpu/$b/apps anneal --npy $f --m $m --iters 10 --tol 0 --backend cuda --seed 1 2>&1)
    echo "RESULT $kind ${n}x${d}x${m} $b $(grep -A1 -E '^backend ' <<<"$o" | tail -1 | tr -s ' ') | $(grep -E '^whole run' <<<"$o")"
  done
done
