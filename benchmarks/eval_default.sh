#!/usr/bin/env bash
# Evaluate a checkpoint (default: the embedded model) as benchmarks/RESULTS.md reports it.
#   benchmarks/eval_default.sh                       # the embedded model
#   MODEL=runs/cpu1/best OUT=runs/eval-cpu1 benchmarks/eval_default.sh
# Two processes, one core each: (1) HumanEval single-line, every 17th task (61), all decoding
# arms; (2) the held-out FIM set (30 holes) with all arms, then multi-line (every 200th, 30) and
# random-span (every 100th, 17) with the engine's default decoding and the empty-fill floor.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
MODEL=${MODEL:-default}
OUT=${OUT:-runs/eval}
export PYTHONPATH=$PWD:$PWD/engine:$PWD/kernels OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
mkdir -p "$OUT"
common=(--model "$MODEL" --threads 1 --workers 1)
[[ -d "${HELDOUT_DATA:-runs/data/heldout}" ]] && common+=(--heldout-data "${HELDOUT_DATA:-runs/data/heldout}")
[[ -n "${LIMIT:-}" ]] && common+=(--limit "$LIMIT")  # a quick dry run: LIMIT=3

"$PY" -m dllm_engine.evaluation "${common[@]}" --benchmarks single-line --stride 17 --arms all \
  --out-json "$OUT/single.json" --out-md "$OUT/single.md" > "$OUT/single.log" 2>&1 &
p1=$!
{
  "$PY" -m dllm_engine.evaluation "${common[@]}" --benchmarks heldout --heldout-count "${HELDOUT:-30}" --arms all \
    --out-json "$OUT/heldout.json" --out-md "$OUT/heldout.md"
  "$PY" -m dllm_engine.evaluation "${common[@]}" --benchmarks multi-line --stride 200 --arms empty,var-thr \
    --out-json "$OUT/multi.json" --out-md "$OUT/multi.md"
  "$PY" -m dllm_engine.evaluation "${common[@]}" --benchmarks random-span --stride 100 --arms empty,var-thr \
    --out-json "$OUT/span.json" --out-md "$OUT/span.md"
} > "$OUT/rest.log" 2>&1 &
p2=$!
wait $p1 $p2
cat "$OUT"/single.md "$OUT"/heldout.md "$OUT"/multi.md "$OUT"/span.md
