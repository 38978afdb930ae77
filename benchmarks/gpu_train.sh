#!/usr/bin/env bash
# One-shot single-GPU training recipe (issue 3): train the GPU preset (~19M params, bf16
# autocast, batches built by 8 worker processes) for BUDGET of training time from the
# carried token files, evaluate it against the embedded default model on the same sample,
# and ship it into engine/dllm_engine/default_model only if it evaluates better.
#
#   here (CPU):     dllm-lsp train --prepare-only --with-packages --data runs/data-pkg
#                   (stdlib + permissively licensed installed packages, 4 MB of source each; the
#                   stdlib alone, --data runs/data without --with-packages, is ~6 MB of tokens)
#   on the device:  run(command="DATA=runs/data-pkg benchmarks/gpu_train.sh",
#                       carry=["runs/data-pkg/train", "runs/data-pkg/heldout"], timeout_s=590)
#                   then reassemble: cat FILES_AT/model.safetensors.part-* > model.safetensors
#
# Needs only python3 with torch, tokenizers, safetensors, numpy (the device image has them;
# the language-server package is not imported). Everything lands in $OUT (default runs/gpu/out):
# the checkpoint split into <16 MiB parts and meta.tar.gz (config, training facts, loss curve,
# both evaluation reports, the train log). The CPU smoke test of this path:
#   BUDGET=20s TINY=1 DEVICE=cpu benchmarks/gpu_train.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
DATA=${DATA:-runs/data}
RUN=${RUN:-runs/gpu}
OUT=${OUT:-$RUN/out}
BUDGET=${BUDGET:-5m}
DEVICE=${DEVICE:-auto}
EVAL=(--benchmarks single-line,heldout --stride "${STRIDE:-17}" --heldout-data "$DATA/heldout"
      --heldout-count "${HELDOUT:-60}" --arms var-thr,var-1,ora-thr,ora-1 --threads 4 --workers 8)
EXTRA=()
if [[ -n "${TINY:-}" ]]; then  # smoke-test size: exercises every step on a CPU in about a minute
  EXTRA=(--hidden 32 --layers 2 --heads 2 --kv-heads 1 --ffn 64 --batch-size 4 --context 64 --workers 2 --eval-every 5)
  EVAL=(--benchmarks single-line,heldout --limit 2 --heldout-data "$DATA/heldout" --heldout-count 3
        --arms var-thr,ora-1 --threads 1 --workers 2)
fi
export PYTHONPATH=$PWD:$PWD/engine:$PWD/kernels PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT"

nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"

started=$(date +%s)
"$PY" -m dllm_engine.training --gpu-preset --device "$DEVICE" --data "$DATA" --out "$RUN" \
  --time-budget "$BUDGET" --resume "${EXTRA[@]}" 2>&1 | tee "$OUT/train.log"
echo "train wall: $(( $(date +%s) - started ))s"

CURRENT="$RUN/default-before"  # the embedded model as it was, for the comparison
rm -rf "$CURRENT" && cp -r engine/dllm_engine/default_model "$CURRENT"
"$PY" -m dllm_engine.evaluation --model "$RUN/best" "${EVAL[@]}" \
  --out-json "$OUT/eval_gpu.json" --out-md "$OUT/eval_gpu.md" 2>&1 | tail -n 12
"$PY" -m dllm_engine.evaluation --model "$CURRENT" "${EVAL[@]}" \
  --out-json "$OUT/eval_default.json" --out-md "$OUT/eval_default.md" 2>&1 | tail -n 12

shipped=no
if "$PY" -m dllm_engine.training.ship --candidate "$RUN/best" --candidate-eval "$OUT/eval_gpu.json" \
     --baseline-eval "$OUT/eval_default.json" --dest engine/dllm_engine/default_model; then
  shipped=yes
fi
echo "shipped: $shipped" | tee "$OUT/verdict.txt"
echo "total wall: $(( $(date +%s) - started ))s"

# Bring the checkpoint back in parts under the 16 MiB-per-file limit, the rest in one archive.
split -b 15m -d "$RUN/best/model.safetensors" "$OUT/model.safetensors.part-"
cp "$RUN/best/config.json" "$RUN/best/training.json" "$RUN/loss.csv" "$OUT/"
cp "$RUN"/loss.png "$RUN"/loss.svg "$OUT/" 2>/dev/null || true
(cd "$OUT" && tar czf meta.tar.gz --remove-files config.json training.json loss.csv train.log verdict.txt \
   eval_gpu.json eval_gpu.md eval_default.json eval_default.md $(ls loss.png loss.svg 2>/dev/null))
ls -la "$OUT"
