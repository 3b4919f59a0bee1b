# Session 7, call 11: `apps bench --quick` of this tree: the launch
# overhead line (gpu-core's typed launch, raw cudarc, and the typed launch
# with stream-local buffers on a stream of their own), three runs.
set -u
(cd .gpu/s7 && python3 -c "import tarfile; tarfile.open('lo.tar.xz').extractall()")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for rep in 1 2 3; do timeout 150 .gpu/s7/lo/apps bench --quick --backend cuda --json $OUT/bench$rep.json 2>&1 | grep -E "launch overhead|error" ; done
