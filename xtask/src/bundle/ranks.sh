# Sourced by run.sh for `bash run.sh ranks` (and `all`): the anneal as one
# process per GPU against one GPU, at 8M x 128 x 2048 x 30 (KILN_RANKS_N
# changes the points), each run's whole time (launch to result, measured
# here around the command) beside its iterations' time (the `whole run`
# line of apps), and the speedups of both; each rank's setup in parts is
# in its `rank R: setup` line. Then a rank that exits mid-run, which must
# end the run naming it within 60 s, and the two-hosts run: two ranks in
# two network namespaces over NCCL's socket transport (two-hosts.sh, beside
# this file; needs root).
if (( gpus >= 2 )); then
  shape=(--backend cuda --n "${KILN_RANKS_N:-8000000}" --d 128 --m 2048 --iters 30 --tol 0)
  # timed NAME CMD...: runs CMD, its output shown and kept in $timed_log;
  # sets $timed_ms (launch to result) and $timed_iters_ms.
  timed() {
    local name=$1 t0 t1 rc; shift
    timed_log=$(mktemp)
    t0=$(date +%s%N)
    "$@" 2>&1 | tee "$timed_log" | grep -v 'iteration *[0-9]*:'; rc=${PIPESTATUS[0]}
    t1=$(date +%s%N)
    timed_ms=$(( (t1 - t0) / 1000000 ))
    timed_iters_ms=$(grep -oE 'whole run [0-9.]+ ms \(setup [0-9.]+ ms, iterations [0-9.]+' "$timed_log" | tail -n 1 | awk '{print $NF}')
    echo "$name: launch to result ${timed_ms} ms, iterations ${timed_iters_ms:-?} ms"
    rm -f "$timed_log"
    return "$rc"
  }
  one_gpu() { timed "one gpu" ./bin/apps anneal "${shape[@]}" && one_ms=$timed_ms one_iters=$timed_iters_ms; }
  per_gpu() { timed "$gpus ranks" ./bin/apps launch --gpus all -- anneal "${shape[@]}" && ranks_ms=$timed_ms ranks_iters=$timed_iters_ms; }
  one_ms="" ranks_ms=""
  step "anneal on one gpu" one_gpu
  step "anneal as one process per gpu" per_gpu
  if [[ -n $one_ms && -n $ranks_ms && -n $one_iters && -n $ranks_iters ]]; then
    awk -v g="$gpus" -v a="$one_ms" -v b="$ranks_ms" -v c="$one_iters" -v d="$ranks_iters" 'BEGIN {
      printf "ranks: %d gpus over one gpu: whole run %.2fx (%d ms vs %d ms), iterations %.2fx (%.1f ms vs %.1f ms)\n", g, (b > 0 ? a / b : 0), b, a, (d > 0 ? c / d : 0), d, c }'
  fi
  rank_fault() {
    local out rc; out=$(KILN_FAULT_EXIT_RANK=1:3 timeout 60 ./bin/apps launch --gpus all -- anneal "${shape[@]}" 2>&1); rc=$?
    echo "$out" | tail -n 8
    [[ $rc != 0 && $rc != 124 ]] && grep -q "rank 1 exited with status 3" <<<"$out"
  }
  step "a rank that exits mid-run ends the run within 60 s" rank_fault
  if (( $(id -u) == 0 )) || command -v sudo >/dev/null 2>&1; then
    step "two hosts (network namespaces, nccl sockets)" bash two-hosts.sh --apps bin/apps --backend cuda
  else
    echo "two hosts: needs root for network namespaces: not run"
  fi
else
  echo "ranks: needs 2 GPUs, $gpus here: not run"
fi
