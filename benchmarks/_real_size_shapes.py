"""The real shapes bench_real_size_load.py writes: name -> writer into a folder (returns bytes on disk).

Sizes, shard counts and special ids follow the public checkpoints' config.json / tokenizer:
Dream-v0 at the Qwen2.5-1.5B shape (the issue's baseline, untied head, 2 shards), Dream-Coder-7B
and DiffuCoder-7B (Qwen2.5-7B, 4 shards), LLaDA-8B (OLMo names, 6 shards), and DiffusionGemma
(google/diffusiongemma-26B-A4B-it's text config with fewer layers: 26B in bf16 is 52 GB, more
than this machine's RAM; the config values are the Gemma 4 26B-A4B ones as we know them,
not checked against the hub from this offline machine).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from _real_size_ckpt import LLADA_8B, llada_tensors, qwen2, qwen2_tensors, write_sharded, write_tokenizer

QWEN_MASK, QWEN_EOS, DLM_PAD = 151666, 151643, 151665


def _qwen(folder: Path, cfg: dict, shards: int, specials: dict[str, int]) -> int:
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    write_tokenizer(folder, cfg["vocab_size"], specials, {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
                                                          "mask_token": "<|mask|>"})
    return write_sharded(folder, qwen2_tensors(cfg), shards)


def dream_1_5b(folder: Path) -> int:
    cfg = qwen2(1536, 8960, 28, 12, 2, 151936, False, QWEN_MASK, QWEN_EOS)
    return _qwen(folder, cfg, 2, {"<|endoftext|>": QWEN_EOS, "<|mask|>": QWEN_MASK})


def dream_coder_7b(folder: Path) -> int:
    cfg = qwen2(3584, 18944, 28, 28, 4, 152064, False, QWEN_MASK, QWEN_EOS)
    return _qwen(folder, cfg, 4, {"<|endoftext|>": QWEN_EOS, "<|mask|>": QWEN_MASK})


def diffucoder_7b(folder: Path) -> int:
    cfg = qwen2(3584, 18944, 28, 28, 4, 152064, False, QWEN_MASK, QWEN_EOS)
    return _qwen(folder, cfg, 4, {"<|endoftext|>": QWEN_EOS, "<|mask|>": QWEN_MASK, "<|dlm_pad|>": DLM_PAD})


def llada_8b(folder: Path) -> int:
    (folder / "config.json").write_text(json.dumps(LLADA_8B, indent=2))
    write_tokenizer(folder, LLADA_8B["vocab_size"], {"<|endoftext|>": 126081, "<|mdm_mask|>": 126336, "<|eot_id|>": 126348},
                    {"eos_token": "<|endoftext|>", "mask_token": "<|mdm_mask|>"})
    return write_sharded(folder, llada_tensors(LLADA_8B), 6)


GEMMA_TEXT = dict(vocab_size=262144, hidden_size=2816, intermediate_size=2112, moe_intermediate_size=704,
                  num_experts=128, top_k_experts=8, num_attention_heads=16, num_key_value_heads=8, head_dim=256,
                  global_head_dim=512, num_global_key_value_heads=2, sliding_window=1024,
                  max_position_embeddings=262144, final_logit_softcapping=30.0, pad_token_id=0, eos_token_id=1,
                  bos_token_id=2)
GEMMA_VISION = dict(model_type="gemma4_vision", hidden_size=1152, intermediate_size=4304, num_hidden_layers=27,
                    num_attention_heads=16, num_key_value_heads=16, head_dim=72)
GEMMA_LAYERS = 6  # of 30: five sliding-window layers and one global, the real 5:1 pattern


def diffusion_gemma(folder: Path, layers: int = GEMMA_LAYERS) -> int:
    """Names and shapes from transformers' class built on the meta device; stored as save_pretrained
    stores them (a tied pair once, under the decoder's name; the head is tied to the embedding)."""
    from transformers.models.diffusion_gemma import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion

    types = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(layers)]
    types[-1] = "full_attention"
    cfg = DiffusionGemmaConfig(text_config=dict(GEMMA_TEXT, num_hidden_layers=layers, layer_types=types),
                               vision_config=GEMMA_VISION, canvas_length=256, boi_token_id=255999,
                               eoi_token_id=258882, image_token_id=258880)
    cfg.architectures = ["DiffusionGemmaForBlockDiffusion"]
    with torch.device("meta"):
        model = DiffusionGemmaForBlockDiffusion(cfg)
    state, seen, tensors = model.state_dict(keep_vars=True), set(), []
    for name in sorted(state, key=lambda n: n.startswith("model.encoder.")):  # the decoder's name of a tied pair
        if name == "lm_head.weight" or id(state[name]) in seen:
            continue
        seen.add(id(state[name]))
        tensors.append((name, tuple(state[name].shape)))
    cfg.save_pretrained(str(folder))
    write_tokenizer(folder, GEMMA_TEXT["vocab_size"], {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<mask>": 4,
                                                       "<end_of_turn>": 106},
                    {"eos_token": "<eos>", "pad_token": "<pad>", "bos_token": "<bos>", "unk_token": "<unk>",
                     "mask_token": "<mask>"})
    return write_sharded(folder, tensors, 3)


SHAPES = {"dream-1.5b": dream_1_5b, "dream-coder-7b": dream_coder_7b, "diffucoder-7b": diffucoder_7b,
          "llada-8b": llada_8b, "diffusion-gemma": diffusion_gemma}


def write_shape(name: str, folder: Path, **options) -> int:
    return SHAPES[name](folder, **options)
