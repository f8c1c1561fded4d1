#!/usr/bin/env bash
# The prepared GPU measurement, at most 8 minutes in all (TOTAL_SECONDS, default 480):
#
#   bash experiments/gpu_measure.sh OUT_DIR
#   SMALL=1 bash experiments/gpu_measure.sh OUT_DIR   # every size tiny: a check on a CPU
#
# Each part runs under `timeout` and writes JSON into OUT_DIR (its log beside it); a part
# that fails or runs out of time is reported and the next one runs:
#  split  experiments/gpu_split.py: one chunk of StABL (n = 30, R = 131,072, T = 512) on
#         the path simulate picks, split into compute, device_get and the host scatter, and a
#         raw 512 MiB device-to-host copy, pageable and pinned -> OUT_DIR/split.json
#  bench  stabl-jax bench --gpu -> OUT_DIR/bench/benchmark.json (rewritten after every row)
#  trace  if 30 s or more are left: a jax.profiler trace of that chunk -> OUT_DIR/trace,
#         OUT_DIR/trace.json
set -u
out=${1:?usage: bash experiments/gpu_measure.sh OUT_DIR}
mkdir -p "$out"
export XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python=${PYTHON:-python3}
end=$((SECONDS + ${TOTAL_SECONDS:-480}))
if [ -n "${SMALL:-}" ]; then
  sizes=(--runs 256 --rounds 64 --copy-mib 8)
  quick=(--quick)
else
  sizes=()
  quick=()
fi

run_part() {  # $1: the part's name, $2: its seconds at most; the rest: its command
  local name=$1 limit=$2
  shift 2
  local left=$((end - SECONDS - 15))  # room for a SIGKILL 10 s after the SIGTERM
  [ "$limit" -gt "$left" ] && limit=$left
  if [ "$limit" -lt 10 ]; then
    echo "$name: skipped, ${left} s left" | tee "$out/$name.log"
    return
  fi
  timeout -k 10 "$limit" "$@" > "$out/$name.log" 2>&1
  local code=$?
  tail -5 "$out/$name.log"
  echo "$name exit code: $code (at most $limit s)" | tee -a "$out/$name.log"
}

run_part split 90 "$python" experiments/gpu_split.py --out "$out/split.json" "${sizes[@]}"
run_part bench 330 "$python" -m stabl_jax bench --gpu "${quick[@]}" --out "$out/bench"
if [ $((end - SECONDS)) -ge 30 ]; then
  run_part trace 60 "$python" experiments/gpu_split.py --out "$out/trace.json" \
    --trace "$out/trace" "${sizes[@]}"
else
  echo "trace: skipped, $((end - SECONDS)) s left"
fi
