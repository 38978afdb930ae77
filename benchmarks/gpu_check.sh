#!/usr/bin/env bash
# Every GPU check of the kernels in one run (< 8 minutes on one H200), results appended to
# benchmarks/RESULTS.md:
#   1. tests/kernels compiled on CUDA (no interpreter)          ~1-2 min (Triton compiles)
#   2. benchmarks/bench_kernels.py: torch eager vs Triton per op  ~1 min
#   3. benchmarks/bench_engine_7b.py: 7B-class pass at batch 1, 16 ~2-3 min
#   4. benchmarks/gpu_check_checkpoints.py: a DiffuCoder-shaped model through the engine ~1 min
#   5. benchmarks/bench_refactor.py: batch refactor holes/s, batched vs one at a time  ~1 min
# (The default model's GPU training run is separate: benchmarks/gpu_train.sh, its own device call.)
# Needs python with torch (CUDA), triton and pytest: set PYTHON=/path/to/python if not `python3`.
# Usage: bash benchmarks/gpu_check.sh            (from anywhere; exits non-zero if any step fails)
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD:$PWD/engine:$PWD/kernels${PYTHONPATH:+:$PYTHONPATH}"
unset TRITON_INTERPRET
PY="${PYTHON:-python3}"
RESULTS="benchmarks/RESULTS.md"
LOG="$(mktemp -d)/gpu_check"
mkdir -p "$LOG"
failed=()

"$PY" -c "import torch, triton; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name(0), 'torch', torch.__version__, 'triton', triton.__version__)" \
  || { echo "gpu_check: needs torch with CUDA and triton" >&2; exit 2; }
[ -f "$RESULTS" ] || printf '# Benchmark results\n' > "$RESULTS"

# -- 1. kernel tests on the GPU --
start=$(date +%s)
DLLM_KERNELS_TEST_DEVICE=cuda timeout 240 "$PY" -m pytest tests/kernels -q -p no:cacheprovider 2>&1 | tee "$LOG/tests.txt"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || failed+=("kernel tests (rc $rc)")
{
  echo
  echo "## gpu_check: tests/kernels compiled on CUDA"
  echo
  echo "- command: \`DLLM_KERNELS_TEST_DEVICE=cuda python -m pytest tests/kernels -q\`"
  echo "- machine: $("$PY" -c 'import torch; print(torch.cuda.get_device_name(0))')"
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), $(( $(date +%s) - start )) s"
  echo "- result: $(tail -n 1 "$LOG/tests.txt")"
  grep -E '^(FAILED|ERROR) ' "$LOG/tests.txt" | head -20 | sed 's/^/  - /'
} >> "$RESULTS"

# -- 2. per-op benchmark --
timeout 150 "$PY" benchmarks/bench_kernels.py --device cuda --sweep --results "$RESULTS" || failed+=("bench_kernels (rc $?)")

# -- 3. end-to-end pass at the 7B-class shape --
timeout 240 "$PY" benchmarks/bench_engine_7b.py --device cuda --profile --results "$RESULTS" || failed+=("bench_engine_7b (rc $?)")

# -- 4. a DiffuCoder-shaped checkpoint through the resident engine --
{
  echo
  echo "## gpu_check: DiffuCoder-shaped model (random bf16) through the engine"
  echo
  echo "- command: \`python benchmarks/gpu_check_checkpoints.py\`; date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
} >> "$RESULTS"
timeout 120 "$PY" benchmarks/gpu_check_checkpoints.py --repeats 2 >> "$RESULTS" 2>"$LOG/ckpt.err" || failed+=("gpu_check_checkpoints (rc $?)")

# -- 5. batch refactoring on the GPU: holes/s batched vs one at a time (default model) --
timeout 120 "$PY" benchmarks/bench_refactor.py --copies 6 --max-tokens 16 --repeats 3 --max-batch 64 --write \
  || failed+=("bench_refactor (rc $?)")

if [ ${#failed[@]} -gt 0 ]; then
  printf '\n- gpu_check failures: %s\n' "${failed[*]}" >> "$RESULTS"
  echo "gpu_check: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "gpu_check: all steps passed; see $RESULTS"
