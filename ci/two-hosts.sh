#!/usr/bin/env bash
# The multi-process anneal across two "hosts" on one machine: two network
# namespaces joined by a veth pair, each with its own address and host name
# (khost1, khost2, in each namespace's /etc/hosts), one rank in each.
#   1. srun's variables (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
#      SLURM_JOB_NODELIST=khost[1-2], the port from SLURM_JOB_ID) start a
#      2-rank run, and torchrun's (RANK, WORLD_SIZE, LOCAL_RANK,
#      MASTER_ADDR=khost1, MASTER_PORT) another: each must give the index
#      the one-process run gives (CPU: the same anchors and assignments,
#      bit for bit; CUDA: the same energy within 1e-4 relative).
#   2. The rank on khost2 is killed (SIGKILL) mid-run: the rank on khost1
#      must exit non-zero within 120 s with one line naming rank 1 and its
#      address.
# Usage: bash ci/two-hosts.sh [--apps PATH] [--backend cpu|cuda]
#   --apps     the apps binary (default: `cargo build -p apps`, then
#              target/debug/apps)
#   --backend  cpu (default; CI) or cuda (the GPU host: rank r on GPU r,
#              each "host" left one GPU by CUDA_VISIBLE_DEVICES, as srun
#              --gpus-per-task=1 does; NCCL over its socket transport only)
# Needs root (or sudo) for `ip netns`; installs iproute2 with apt-get when
# `ip` is missing. Its namespaces, veth pair and /etc/netns entries carry
# this run's own id (two runs at once do not meet), and are removed on any
# exit, failed or not.
set -euo pipefail

apps="" backend=cpu
while (( $# )); do
  case $1 in
    --apps) apps=${2:?--apps needs a path}; shift 2 ;;
    --backend) backend=${2:?--backend needs cpu or cuda}; shift 2 ;;
    *) echo "two-hosts: unknown argument '$1'; usage: two-hosts.sh [--apps PATH] [--backend cpu|cuda]" >&2; exit 2 ;;
  esac
done
case $backend in cpu|cuda) ;; *) echo "two-hosts: --backend $backend: give cpu or cuda" >&2; exit 2 ;; esac

sudo=()
if (( $(id -u) != 0 )); then
  if command -v sudo >/dev/null 2>&1; then sudo=(sudo); else
    echo "two-hosts: network namespaces need root, and sudo is not installed; run as root" >&2; exit 1
  fi
fi
if ! command -v ip >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "two-hosts: installing iproute2"
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq iproute2
  else
    echo "two-hosts: \`ip\` (iproute2) is missing and there is no apt-get; install iproute2" >&2; exit 1
  fi
fi

if [[ -z $apps ]]; then
  cargo build -q -p apps
  apps=target/debug/apps
fi
[[ -x $apps ]] || { echo "two-hosts: $apps is not an executable; build apps or give --apps" >&2; exit 1; }
apps=$(realpath "$apps")

# This run's names: interface names have at most 15 bytes.
id=$(printf '%05x%04x' $(( $$ & 0xfffff )) $(( RANDOM & 0xffff )))
ns=("kiln-$id-1" "kiln-$id-2")
veth=("kv${id}a" "kv${id}b")
addr=(10.213.7.1 10.213.7.2)
work=$(mktemp -d)
pids=()

cleanup() {
  local rc=$?
  for pid in ${pids[@]+"${pids[@]}"}; do kill -KILL "$pid" 2>/dev/null || true; done
  for n in "${ns[@]}"; do
    "${sudo[@]}" ip netns del "$n" 2>/dev/null || true
    "${sudo[@]}" rm -rf "/etc/netns/$n"
  done
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"${sudo[@]}" ip link add "${veth[0]}" type veth peer name "${veth[1]}"
for i in 0 1; do
  "${sudo[@]}" ip netns add "${ns[$i]}"
  "${sudo[@]}" ip link set "${veth[$i]}" netns "${ns[$i]}"
  "${sudo[@]}" ip -n "${ns[$i]}" addr add "${addr[$i]}/24" dev "${veth[$i]}"
  "${sudo[@]}" ip -n "${ns[$i]}" link set "${veth[$i]}" up
  "${sudo[@]}" ip -n "${ns[$i]}" link set lo up
  # `ip netns exec` mounts /etc/netns/NAME/hosts over /etc/hosts.
  "${sudo[@]}" mkdir -p "/etc/netns/${ns[$i]}"
  printf '127.0.0.1 localhost\n%s khost1\n%s khost2\n' "${addr[0]}" "${addr[1]}" |
    "${sudo[@]}" tee "/etc/netns/${ns[$i]}/hosts" >/dev/null
done
echo "two-hosts: khost1 = ${addr[0]} in ${ns[0]}, khost2 = ${addr[1]} in ${ns[1]}"

# Each rank starts from a clean environment: no launcher variable of the
# caller's leaks in.
# A rank waits at most 120 s for a peer (KILN_RANK_TIMEOUT): none hangs.
base=(env -i "PATH=$PATH" "HOME=${HOME:-/root}" KILN_RANK_TIMEOUT=120)
for var in LD_LIBRARY_PATH KILN_CUDA KILN_CACHE_DIR NCCL_DEBUG; do
  [[ -n ${!var:-} ]] && base+=("$var=${!var}")
done
if [[ $backend == cuda ]]; then
  # NCCL between the namespaces over TCP only, on the veth.
  base+=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=kv)
  shape=(--backend cuda --n "${KILN_TWO_HOSTS_N:-2000000}" --d 128 --m 512 --iters 20 --tol 0 --seed 3)
  kill_shape=(--backend cuda --n 2000000 --d 128 --m 512 --iters 100000 --tol 0)
else
  shape=(--backend cpu --n 6000 --d 16 --m 24 --iters 12 --tol 0 --seed 5)
  kill_shape=(--backend cpu --n 40000 --d 16 --m 32 --iters 100000 --tol 0)
fi

# rank_in I VAR=VALUE... -- ARGS: rank on host I+1, its output in
# $work/<tag>.<I>; sets $pid.
rank_in() {
  local i=$1 tag=$2; shift 2
  local vars=()
  while [[ $1 != -- ]]; do vars+=("$1"); shift; done
  shift
  # `ip netns exec` and `env` exec in place: $! becomes the rank itself.
  "${sudo[@]}" ip netns exec "${ns[$i]}" "${base[@]}" "${vars[@]}" "$apps" anneal "$@" \
    >"$work/$tag.$i" 2>&1 &
  pid=$!
  pids+=("$pid")
}

gpu_vars() { [[ $backend == cuda ]] && echo "CUDA_VISIBLE_DEVICES=$1" || echo "KILN_TWO_HOSTS=1"; }

energy() { grep -m1 '"energy":' "$1/index.json" | sed -E 's/.*"energy": *([-+0-9.eE]+).*/\1/'; }

# The index of `dir` against the one-process run's.
same_index() {
  local dir=$1 what=$2
  [[ -f $dir/index.json ]] || { echo "two-hosts: $what wrote no index"; return 1; }
  if [[ $backend == cpu ]]; then
    cmp -s "$work/one/anchors.npy" "$dir/anchors.npy" || { echo "two-hosts: $what: the anchors differ from one process's"; return 1; }
    cmp -s "$work/one/assignments.npy" "$dir/assignments.npy" || { echo "two-hosts: $what: the assignments differ from one process's"; return 1; }
  fi
  local a b
  a=$(energy "$work/one") b=$(energy "$dir")
  awk -v a="$a" -v b="$b" 'BEGIN { d = (a > b ? a - b : b - a) / a; exit !(d <= 1e-4) }' ||
    { echo "two-hosts: $what: energy $b, one process $a"; return 1; }
  echo "two-hosts: $what: the index one process writes (energy $b)"
}

# Both ranks of a run; fails unless both succeed.
both() {
  local tag=$1; shift
  local status=0 p0 p1
  rank_in 0 "$tag" "${@/@RANK@/0}" "$(gpu_vars 0)" -- "${shape[@]}" --out "$work/$tag"; p0=$pid
  rank_in 1 "$tag" "${@/@RANK@/1}" "$(gpu_vars 1)" -- "${shape[@]}" --out "$work/$tag-1"; p1=$pid
  wait "$p0" || status=$?
  wait "$p1" || status=$?
  sed "s/^/[$tag khost1] /" "$work/$tag.0" | grep -v '^\S* \S* *iteration' || true
  sed "s/^/[$tag khost2] /" "$work/$tag.1" | grep -v '^\S* \S* *iteration' || true
  (( status == 0 )) || { echo "two-hosts: $tag: a rank failed (status $status)"; return 1; }
  grep -q "rank 1 of 2: rows" "$work/$tag.1" || { echo "two-hosts: $tag: khost2's rank is not rank 1 of 2"; return 1; }
  same_index "$work/$tag" "$tag"
}

echo "two-hosts: one process"
ip_one=("${sudo[@]}" ip netns exec "${ns[0]}" "${base[@]}" $(gpu_vars 0))
"${ip_one[@]}" "$apps" anneal "${shape[@]}" --out "$work/one" >"$work/one.log" 2>&1 ||
  { cat "$work/one.log"; echo "two-hosts: the one-process run failed"; exit 1; }
grep -v iteration "$work/one.log"

secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
job=$(( (RANDOM << 8) + RANDOM ))
echo "two-hosts: srun-style variables (SLURM_JOB_ID=$job)"
both srun SLURM_JOB_ID=$job SLURM_STEP_ID=0 SLURM_PROCID=@RANK@ SLURM_NTASKS=2 SLURM_STEP_NUM_TASKS=2 \
  SLURM_LOCALID=0 "SLURM_JOB_NODELIST=khost[1-2]" "SLURM_STEP_NODELIST=khost[1-2]"

echo "two-hosts: torchrun-style variables"
both torchrun RANK=@RANK@ WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=khost1 \
  MASTER_PORT=29500 "KILN_JOB_SECRET=$secret" TORCHELASTIC_RUN_ID=two-hosts

echo "two-hosts: the rank on khost2 killed mid-run"
vars=(WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=khost1 MASTER_PORT=29501 "KILN_JOB_SECRET=$secret")
rank_in 0 kill RANK=0 "${vars[@]}" "$(gpu_vars 0)" -- "${kill_shape[@]}"; p0=$pid
rank_in 1 kill RANK=1 "${vars[@]}" "$(gpu_vars 1)" -- "${kill_shape[@]}"; p1=$pid
for _ in $(seq 600); do
  grep -q 'iteration *2:' "$work/kill.0" 2>/dev/null && break
  kill -0 "$p0" 2>/dev/null || break
  sleep 0.2
done
grep -q 'iteration *2:' "$work/kill.0" || { cat "$work/kill.0" "$work/kill.1"; echo "two-hosts: the run never reached iteration 2"; exit 1; }
[[ $(cat "/proc/$p1/comm" 2>/dev/null) == apps ]] || { echo "two-hosts: pid $p1 is not khost2's rank"; exit 1; }
kill -KILL "$p1"
wait "$p1" 2>/dev/null || true
# khost1's rank must end on its own, within 120 s.
for _ in $(seq 600); do kill -0 "$p0" 2>/dev/null || break; sleep 0.2; done
if kill -0 "$p0" 2>/dev/null; then
  echo "two-hosts: khost1's rank still runs 120 s after khost2's was killed"; exit 1
fi
rc=0; wait "$p0" || rc=$?
errors=$(grep '^error:' "$work/kill.0" || true)
echo "$errors" | sed 's/^/[kill khost1] /'
if (( rc == 0 )); then
  echo "two-hosts: khost1's rank succeeded after khost2's was killed"; exit 1
fi
if [[ $(grep -c . <<<"$errors") != 1 ]] || ! grep -q "rank 1 (at ${addr[1]}:[0-9]*) closed its connection" <<<"$errors"; then
  cat "$work/kill.0"
  echo "two-hosts: khost1's rank did not fail in one line naming rank 1 at ${addr[1]}"; exit 1
fi
echo "two-hosts: passed ($backend): srun-style and torchrun-style runs across two hosts, and a killed rank named"
