#!/usr/bin/env bash
# The speed table, the large run and the test suite on a machine with a CUDA (or ROCm/TPU)
# build of JAX.
#
#   bash experiments/gpu_check.sh [OUT_DIR]
#   PARTS="bench suite" bash experiments/gpu_check.sh OUT_DIR   # some parts only
#
# Needs the test dependencies (pytest, pytest-xdist, hypothesis, cocoex for tests/envs/test_bbob.py)
# and the project on PYTHONPATH or installed. Each part is bounded in time (seconds, from the
# environment: BENCH_SECONDS, LARGE_SECONDS, SUITE_SECONDS, COMPILE_SECONDS,
# COMPARE_SECONDS; WORKERS test processes); logs and the benchmark JSON go to OUT_DIR
# (default: gpu_results). PARTS names the parts to run, in this order (default all):
#  bench    `stabl-jax bench --gpu`: every row of the speed table with the XLA path and with
#           the fused Pallas kernel (kernel="pallas"), into OUT_DIR/bench;
#  large    R = 2^20 runs of StABL (n = 30, T = 4096, the loss trace) through simulate
#           (LARGE_KERNEL, default auto), into OUT_DIR/large.json;
#  suite    the test suite, one line per test (-v) so that a bounded run keeps what it
#           reached, and each failure's traceback in OUT_DIR/failures.log as it happens;
#  compile  experiments/gpu_compile.py --local: the kernels of one round, counted on this
#           device;
#  compare  what holds between this device and the CPU: one small config (COMPARE_CONFIG,
#           default figure1 at COMPARE_RUNS = 64 runs, every trace kept) run on each, then
#           `stabl-jax compare` bit for bit and at relative tolerances 1e-6 and 1e-3.
set -u
out=${1:-gpu_results}
parts=${PARTS:-bench large suite compile compare}
for part in $parts; do
  case $part in
    bench | large | suite | compile | compare) ;;
    *)
      echo "error: PARTS: unknown part '$part'; choose from: bench large suite compile compare" >&2
      exit 2
      ;;
  esac
done
mkdir -p "$out"
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # the test workers share one device
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python3 -c "import jax; print('devices:', jax.devices(), 'jax', jax.__version__)" | tee "$out/devices.log"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null | tee -a "$out/devices.log"

part_bench() {
  timeout "${BENCH_SECONDS:-330}" python3 -m stabl_jax bench --gpu --out "$out/bench" \
    > "$out/bench.log" 2>&1
  echo "bench exit code: $?" | tee -a "$out/bench.log"
  cat "$out/bench.log"
}

part_large() {
  LARGE_OUT="$out/large.json" timeout "${LARGE_SECONDS:-120}" python3 - > "$out/large.log" 2>&1 <<'PY'
import json, os, time
import jax
from stabl_jax import ExpertAdvice, SimOptions, make, simulate
runs, horizon, kernel = 1 << 20, 4096, os.environ.get("LARGE_KERNEL", "auto")
learner, env = make("stabl", num_arms=30, horizon=horizon), ExpertAdvice(num_arms=30, horizon=horizon)
start = time.perf_counter()
res = simulate(learner, env, jax.random.key(0), runs, traces=("loss",),
               options=SimOptions(chunk_size=256, kernel=kernel))
large = {"device": jax.devices()[0].device_kind, "kernel": res.kernel, "runs": runs,
         "horizon": horizon, "wall_seconds": time.perf_counter() - start,
         "run_seconds": res.run_seconds, "compile_seconds": res.compile_seconds,
         "run_steps_per_s": runs * horizon / res.run_seconds,
         "mean_loss": float(res.loss.mean(dtype="float64"))}
print(large)
with open(os.environ["LARGE_OUT"], "w") as f:
    json.dump(large, f, indent=2)
PY
  echo "large exit code: $?" | tee -a "$out/large.log"
  tail -3 "$out/large.log"
}

part_suite() {
  STABL_JAX_FAILURE_LOG="$out/failures.log" timeout "${SUITE_SECONDS:-600}" \
    python3 -m pytest -v -n "${WORKERS:-8}" --dist load -p no:cacheprovider -o addopts="" \
    --doctest-modules tests stabl_jax > "$out/tests.log" 2>&1
  echo "suite exit code: $?" | tee -a "$out/tests.log"
  grep -cE " PASSED " "$out/tests.log" | sed 's/^/passed so far: /'
  grep -E "(FAILED|ERROR) " "$out/tests.log" | head -40
  tail -3 "$out/tests.log"
}

part_compile() {
  timeout "${COMPILE_SECONDS:-120}" python3 experiments/gpu_compile.py --local \
    --out "$out/gpu_compile.json" > "$out/compile.log" 2>&1
  echo "gpu_compile exit code: $?" | tee -a "$out/compile.log"
  grep "^|" "$out/compile.log"
}

compare_run() {  # $1: the results folder; the rest: the run's environment
  local folder=$1
  shift
  env "$@" python3 -m stabl_jax --compile-cache off run "${COMPARE_CONFIG:-figure1}" \
    --runs "${COMPARE_RUNS:-64}" --set 'save_traces="all"' --no-progress --out "$folder"
}

part_compare() {
  local folders="$out/compare" code rtol
  rm -rf "$folders"
  mkdir -p "$folders"
  export -f compare_run
  timeout "${COMPARE_SECONDS:-150}" bash -c \
    "compare_run '$folders/device' && compare_run '$folders/cpu' JAX_PLATFORMS=cpu" \
    > "$out/compare.log" 2>&1
  echo "device and CPU runs exit code: $?" | tee -a "$out/compare.log"
  for rtol in 0 1e-6 1e-3; do
    python3 -m stabl_jax compare "$folders/device" "$folders/cpu" --rtol "$rtol" \
      > "$out/compare_rtol_$rtol.log" 2>&1
    code=$?
    head -30 "$out/compare_rtol_$rtol.log"
    echo "compare --rtol $rtol exit code: $code" | tee -a "$out/compare_rtol_$rtol.log"
  done
}

for part in $parts; do
  "part_$part"
done
