"""Random-weight checkpoints at the public checkpoints' real shapes, in their on-disk format.

For bench_real_size_load.py: config.json with the real keys, sharded safetensors with
`model.safetensors.index.json`, and a tokenizer.json carrying the family's special tokens
at their real ids. Tensors are streamed to disk one at a time (a 16 GB checkpoint is never
in memory), filled from one random pool at random offsets: random enough for a forward,
and the writer is I/O-bound instead of spending minutes in randn on two cores.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import torch

DTYPE_TAG = {torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32"}
POOL = 1 << 24  # random values reused for every tensor


def qwen2(hidden, inter, layers, heads, kv, vocab, tie, mask_id, eos_id, arch="DreamModel", mtype="Dream") -> dict:
    """A Qwen2.5-shape config as Dream / Dream-Coder / DiffuCoder ship it."""
    return {"architectures": [arch], "model_type": mtype, "auto_map": {"AutoModel": "modeling_dream.DreamModel"},
            "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
            "num_attention_heads": heads, "num_key_value_heads": kv, "vocab_size": vocab, "hidden_act": "silu",
            "max_position_embeddings": 131072, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "rope_scaling": None,
            "tie_word_embeddings": tie, "use_sliding_window": False, "sliding_window": None, "attention_dropout": 0.0,
            "initializer_range": 0.02, "torch_dtype": "bfloat16", "use_cache": False, "mask_token_id": mask_id,
            "bos_token_id": eos_id, "eos_token_id": eos_id, "pad_token_id": eos_id}


def qwen2_tensors(c: dict) -> list[tuple[str, tuple[int, ...]]]:
    d, hd = c["hidden_size"], c["hidden_size"] // c["num_attention_heads"]
    q, kv, ff = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd, c["intermediate_size"]
    out = [("model.embed_tokens.weight", (c["vocab_size"], d))]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (d,)), (p + "post_attention_layernorm.weight", (d,)),
                (p + "self_attn.q_proj.weight", (q, d)), (p + "self_attn.q_proj.bias", (q,)),
                (p + "self_attn.k_proj.weight", (kv, d)), (p + "self_attn.k_proj.bias", (kv,)),
                (p + "self_attn.v_proj.weight", (kv, d)), (p + "self_attn.v_proj.bias", (kv,)),
                (p + "self_attn.o_proj.weight", (d, q)), (p + "mlp.gate_proj.weight", (ff, d)),
                (p + "mlp.up_proj.weight", (ff, d)), (p + "mlp.down_proj.weight", (d, ff))]
    out.append(("model.norm.weight", (d,)))
    if not c["tie_word_embeddings"]:
        out.append(("lm_head.weight", (c["vocab_size"], d)))
    return out


LLADA_8B = {"architectures": ["LLaDAModelLM"], "model_type": "llada", "auto_map": {"AutoModel": "modeling_llada.LLaDAModelLM"},
            "d_model": 4096, "n_heads": 32, "n_kv_heads": 32, "n_layers": 32, "mlp_hidden_size": 12288, "mlp_ratio": 4,
            "embedding_size": 126464, "vocab_size": 126464, "rope_theta": 500000.0, "rms_norm_eps": 1e-5,
            "max_sequence_length": 4096, "mask_token_id": 126336, "eos_token_id": 126081, "pad_token_id": 126081,
            "weight_tying": False, "block_type": "llama", "layer_norm_type": "rms", "activation_type": "silu",
            "include_bias": False, "include_qkv_bias": False, "alibi": False, "rope": True, "attention_layer_norm": False,
            "scale_logits": False, "input_emb_norm": False, "flash_attention": False, "torch_dtype": "bfloat16"}


def llada_tensors(c: dict) -> list[tuple[str, tuple[int, ...]]]:
    d, ff, v = c["d_model"], c["mlp_hidden_size"], c["embedding_size"]
    out = [("model.transformer.wte.weight", (v, d))]
    for i in range(c["n_layers"]):
        p = f"model.transformer.blocks.{i}."
        out += [(p + "attn_norm.weight", (d,)), (p + "ff_norm.weight", (d,)), (p + "q_proj.weight", (d, d)),
                (p + "k_proj.weight", (d, d)), (p + "v_proj.weight", (d, d)), (p + "attn_out.weight", (d, d)),
                (p + "ff_proj.weight", (ff, d)), (p + "up_proj.weight", (ff, d)), (p + "ff_out.weight", (d, ff))]
    return out + [("model.transformer.ln_f.weight", (d,)), ("model.transformer.ff_out.weight", (v, d))]


def write_safetensors(file: Path, tensors: list[tuple[str, tuple[int, ...]]], dtype: torch.dtype, pool: torch.Tensor,
                      gen: torch.Generator) -> int:
    """Header first (its offsets are known from the shapes), then each tensor's bytes; returns bytes written."""
    size = torch.empty((), dtype=dtype).element_size()
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in tensors:
        n = size * int(torch.Size(shape).numel())
        header[name] = {"dtype": DTYPE_TAG[dtype], "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # safetensors pads the header so data starts 8-aligned
    with open(file, "wb") as fh:
        fh.write(struct.pack("<Q", len(blob)) + blob)
        for name, shape in tensors:
            fh.write(_fill(name, shape, pool, gen).contiguous().view(torch.uint8).numpy())
    return 8 + len(blob) + offset


def _fill(name: str, shape, pool: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    n = int(torch.Size(shape).numel())
    if len(shape) == 1 and "norm" in name:  # norm gains near 1, as trained checkpoints have
        return (1.0 + pool[:n] * 0.1).to(pool.dtype) if n <= POOL else torch.ones(n, dtype=pool.dtype)
    start = int(torch.randint(0, POOL, (1,), generator=gen))
    reps = (start + n + POOL - 1) // POOL
    return pool.repeat(reps)[start:start + n] if reps > 1 else pool[start:start + n]


def write_sharded(folder: Path, tensors, shards: int, dtype: torch.dtype = torch.bfloat16, seed: int = 0) -> int:
    """Split `tensors` in order into `shards` files of about equal size, with the index; returns bytes on disk."""
    gen = torch.Generator().manual_seed(seed)
    pool = (torch.randn(POOL, generator=gen) * 0.02).to(dtype)
    numel = [int(torch.Size(s).numel()) for _, s in tensors]
    per = sum(numel) / shards
    groups, acc = [[] for _ in range(shards)], 0
    for (name, shape), n in zip(tensors, numel):
        groups[min(int(acc // per), shards - 1)].append((name, shape))
        acc += n
    weight_map, total = {}, 0
    for s, group in enumerate(groups):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        total += write_safetensors(folder / fname, group, dtype, pool, gen)
        weight_map.update({name: fname for name, _ in group})
    size = torch.empty((), dtype=dtype).element_size()
    index = {"metadata": {"total_size": size * sum(numel)}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return total


def write_tokenizer(folder: Path, vocab: int, specials: dict[str, int], roles: dict[str, str]) -> None:
    """A WordLevel tokenizer over the whole vocabulary with the family's special tokens at their ids."""
    ids = set(specials.values())
    words = {f"w{i}": i for i in range(vocab) if i not in ids}
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for t, i in specials.items()]
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
           "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
           "model": {"type": "WordLevel", "vocab": {**words, **specials}, "unk_token": next(iter(words))}}
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    cfg = {"added_tokens_decoder": {str(i): {"content": t, "special": True} for t, i in specials.items()},
           "model_max_length": 131072, **roles}
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    (folder / "special_tokens_map.json").write_text(json.dumps(roles))
