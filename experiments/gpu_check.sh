#!/usr/bin/env bash
# The test suite and the speed table on a machine with a CUDA (or ROCm/TPU) build of JAX.
#
#   bash experiments/gpu_check.sh [OUT_DIR]
#
# Needs the test dependencies (pytest, pytest-xdist, hypothesis, cocoex for tests/test_bbob.py)
# and the project on PYTHONPATH or installed. Each part is bounded in time; logs and the
# benchmark JSON go to OUT_DIR (default: gpu_results). The speed table times every row with
# the XLA path and with the fused Pallas kernel (kernel="pallas"); `stabl-jax bench --gpu`
# then prints the same product's rows with the memory-bandwidth bound column.
set -u
out=${1:-gpu_results}
mkdir -p "$out"
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # eight test workers share one device
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python3 -c "import jax; print('devices:', jax.devices(), 'jax', jax.__version__)" | tee "$out/devices.log"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null | tee -a "$out/devices.log"
timeout "${SUITE_SECONDS:-270}" python3 -m pytest -q -n 8 --dist loadfile -p no:cacheprovider \
  -o addopts="" --doctest-modules tests stabl_jax > "$out/tests.log" 2>&1
echo "suite exit code: $?" | tee -a "$out/tests.log"
grep -E "passed|failed|error" "$out/tests.log" | tail -3
grep -E "^(FAILED|ERROR)" "$out/tests.log" | head -40
timeout "${BENCH_SECONDS:-300}" python3 experiments/gpu_bench.py --out "$out/gpu_bench.json" \
  > "$out/bench.log" 2>&1
echo "bench exit code: $?" | tee -a "$out/bench.log"
cat "$out/bench.log"
timeout "${LARGE_SECONDS:-90}" python3 -c "
import sys; sys.argv = ['gpu_bench', '--out', '$out/gpu_large.json', '--large', '--no-rows']
import runpy; runpy.run_path('experiments/gpu_bench.py', run_name='__main__')
" > "$out/large.log" 2>&1
echo "large exit code: $?" | tee -a "$out/large.log"
tail -3 "$out/large.log"
timeout "${CLI_BENCH_SECONDS:-180}" python3 -m stabl_jax bench --gpu --no-validate \
  --out "$out/cli_bench" > "$out/cli_bench.log" 2>&1
echo "stabl-jax bench --gpu exit code: $?" | tee -a "$out/cli_bench.log"
tail -12 "$out/cli_bench.log"
