# Session 9, call 3 (the same warm host as call 2): compute-sanitizer
# racecheck and synccheck over a whole `apps anneal` run of 10K x 128 x 256,
# 12 iterations (the fused combine-update and the list kernel's finish in
# every iteration; racecheck on call 2's test took longer than its 90 s).
set -u; [ -x /tmp/gpu-bundle/bin/apps ] || tar xJf target/gpu-bundle.tar.xz -C /tmp; D=/tmp/kinds; [ -f $D/normal/x_10000_128.npy ] || python3 .gpu/gen.py $D normal:10000:128 >/dev/null; CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer); for tool in racecheck synccheck; do timeout 150 $CS --tool $tool --error-exitcode 9 /tmp/gpu-bundle/bin/apps anneal --npy $D/normal/x_10000_128.npy --m 256 --iters 12 --tol 0 --backend cuda > $OUT/san_run_$tool.log 2>&1; echo "apps run $tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|whole run" $OUT/san_run_$tool.log | head -3; done
