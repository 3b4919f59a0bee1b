# Session 6, call 1: where the narrow-d wgmma assignment kernel's warps stall,
# per SASS instruction (ncu source page: PC sampling + instructions executed),
# main's apps (b254bec's kernels = 64ab850's) at 1M x 128 x 2048.
set -u
(cd .gpu && python3 -c "import tarfile; tarfile.open('pp.tar.xz').extractall()")
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
D=/tmp/kinds; python3 .gpu/gen.py $D normal:1000000:128 >/dev/null
f=$D/normal/x_1000000_128.npy
.gpu/pp/base/apps anneal --npy $f --m 2048 --iters 10 --tol 0 --backend cuda 2>&1 | grep -E '^whole run'
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout 240 $NCU --set full --import-source no -k regex:assign_wgmma --launch-skip 1 --launch-count 1 -o $OUT/r .gpu/pp/base/apps anneal --npy $f --m 2048 --iters 3 --tol 0 --backend cuda 2>&1 | tail -3
ls -la $OUT
timeout 120 $NCU -i $OUT/r.ncu-rep --page source --print-source sass --csv > $OUT/src.csv 2>$OUT/src.err; echo "src rc=$? $(wc -l < $OUT/src.csv) lines"; head -c 600 $OUT/src.err
head -3 $OUT/src.csv | cut -c1-1500
timeout 120 $NCU -i $OUT/r.ncu-rep --page details --print-details all > $OUT/details.txt 2>&1; echo "details rc=$?"
grep -iE "stall|Warp Cycles|Issue Slots|No Eligible|Duration" $OUT/details.txt | head -60
