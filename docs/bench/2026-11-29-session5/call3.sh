# Session 5, call 3: the setup in parts (s3) at 1M x 768 x 4096, f32 and
# f16; s3's library GPU tests; the wgmma assignment kernel at d = 128 and
# 64 under ncu (main = d32 against the shifted epilogue = epa).
set -u
(cd .gpu && python3 -c "import tarfile; [tarfile.open(f).extractall() for f in ('d32.tar.xz','s3.tar.xz','epa.tar.xz')]")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
NEW=.gpu/s3/apps; D=/tmp/kinds
python3 .gpu/gen.py $D normal:1000000:768 normal:1000000:128 normal:1000000:64 >/dev/null
python3 -c "import numpy as np; np.save('/tmp/h768.npy', np.load('$D/normal/x_1000000_768.npy').astype(np.float16))"
f=$D/normal/x_1000000_768.npy; cat $f /tmp/h768.npy >/dev/null
for rep in 1 2 3 4; do for x in $f /tmp/h768.npy; do
  echo "SETUP $(basename $x) $rep $($NEW anneal --npy $x --m 4096 --iters 10 --tol 0 --backend cuda 2>&1 | grep -E '^whole run')"
done; done 2>&1 | tee $OUT/setup.log
KILN_REQUIRE_GPU=1 timeout 100 .gpu/s3/t_kiln_anneal 2>&1 | grep -E "^test result|panicked|FAILED" | tee $OUT/tests.log
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for d in 128 64; do for b in d32 epa; do
  echo "=== NCU $b d=$d"
  timeout 150 $NCU -k regex:assign_wgmma --launch-skip 1 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats --section MemoryWorkloadAnalysis .gpu/$b/apps anneal --npy $D/normal/x_1000000_$d.npy --m 2048 --iters 3 --tol 0 --backend cuda 2>&1 | grep -vE "^\s*$|^==PROF==|----" | grep -E "^\s+[A-Z]" | head -90
done; done 2>&1 | tee $OUT/ncu.log | head -400
