# Session 5, call 10: the tensor-core kernel choice at narrow d
# (KILN_ANNEAL_TC_TILE: auto = wgmma here, wgmma-chunked, 128 and 64, the
# mma.sync tiles), 1M x {64, 128} x 2048 and 200K x 128 x 16384, normal
# and offset points, the iterations' time; same assignments.
(cd .gpu && python3 -c "import tarfile; tarfile.open('t10.tar.xz').extractall()")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=/tmp/kinds; python3 .gpu/gen.py $D normal:1000000:128 normal:1000000:64 offset:1000000:128 normal:200000:128 >/dev/null
for s in normal:1000000:128:2048 normal:1000000:64:2048 offset:1000000:128:2048 normal:200000:128:16384; do
  IFS=: read kind n d m <<<"$s"; f=$D/$kind/x_${n}_${d}.npy
  for rep in 1 2; do for t in auto wgmma-chunked 128 64; do
    echo "TILE $kind ${n}x${d}x${m} $t $rep $(KILN_ANNEAL_TC_TILE=$t .gpu/t10/apps anneal --npy $f --m $m --iters 10 --tol 0 --backend cuda --out /tmp/o_$t --force 2>&1 | grep -oE 'iterations [0-9.]+ ms' | head -1)"
  done; done
  for t in wgmma-chunked 128 64; do cmp -s /tmp/o_auto/assignments.npy /tmp/o_$t/assignments.npy && echo "SAME $kind ${n}x${d}x${m} $t" || echo "DIFF $kind ${n}x${d}x${m} $t"; done
done 2>&1 | tee $OUT/tile.log
