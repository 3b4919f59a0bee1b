# Session 8, call 6: ncu --set full on the 12th anneal_assign_wgmma launch of a
# 10K x 128 x 256 run (new, cb86f25): where its 19 us go.
set -u
tar xJf target/gpu-bundle.tar.xz -C /tmp
D=/tmp/kinds; NEW=/tmp/gpu-bundle/bin/apps
python3 .gpu/gen.py $D normal:10000:128 >/dev/null
f=$D/normal/x_10000_128.npy
timeout 200 ncu --set full --import-source yes -k anneal_assign_wgmma --launch-skip 11 --launch-count 1 -o $OUT/wg10k $NEW anneal --npy $f --m 256 --iters 30 --tol 0 --backend cuda > $OUT/ncu_run.log 2>&1; echo "ncu rc $?"
ncu --import $OUT/wg10k.ncu-rep --page details > $OUT/details.txt 2>&1
grep -E "Duration|Elapsed Cycles|SM Active Cycles|Registers Per|Achieved Occupancy|Block Limit|Waves Per SM|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Compute \(SM\) Throughput|Memory Throughput|L2 Hit|Theoretical Occupancy|Dynamic Shared" $OUT/details.txt | head -40
ncu --import $OUT/wg10k.ncu-rep --page raw --csv --metrics smsp__pcsamp_warps_issue_stalled_barrier,smsp__pcsamp_warps_issue_stalled_long_scoreboard,smsp__pcsamp_warps_issue_stalled_wait,smsp__pcsamp_warps_issue_stalled_short_scoreboard,smsp__pcsamp_warps_issue_stalled_math_pipe_throttle,smsp__pcsamp_warps_issue_stalled_membar,smsp__pcsamp_warps_issue_stalled_sleeping,smsp__pcsamp_warps_issue_stalled_selected,smsp__pcsamp_warps_issue_stalled_dispatch_stall,smsp__pcsamp_warps_issue_stalled_mio_throttle,smsp__pcsamp_warps_issue_stalled_lg_throttle,smsp__pcsamp_warps_issue_stalled_no_instructions,smsp__pcsamp_warps_issue_stalled_branch_resolving,smsp__pcsamp_warps_issue_stalled_not_selected,smsp__pcsamp_warps_issue_stalled_imc_miss,smsp__pcsamp_warps_issue_stalled_drain,smsp__pcsamp_warps_issue_stalled_misc,smsp__pcsamp_sample_count > $OUT/stalls.csv 2>&1
python3 - $OUT/stalls.csv <<'PY'
import sys, csv
rows = list(csv.reader(open(sys.argv[1])))
h = rows[0]; v = rows[-1]
for k, x in zip(h, v):
    if "pcsamp" in k: print("STALL", k.replace("smsp__pcsamp_warps_issue_stalled_",""), x)
PY
ncu --import $OUT/wg10k.ncu-rep --page source --csv --print-source sass > $OUT/source.csv 2>&1; echo "source rc $? $(wc -l < $OUT/source.csv)"
