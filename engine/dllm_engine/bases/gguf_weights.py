"""Dequantize a GGUF file's tensors into our tensor names (Llama and Gemma 3 architectures).

The `gguf` package (llama.cpp's own reader) memory-maps the file and dequantizes
each tensor with numpy; nothing here runs a second modeling stack. Two things the
GGUF convention does differently from a Hugging Face checkpoint, undone here as
transformers' GGUF loader undoes them:
- dimensions are listed innermost first, so `tensor.shape` is reversed; the
  dequantized numpy array already has the row-major [out, in] shape;
- llama.cpp's converter permutes the rows of q and k per head for Llama (its RoPE
  pairs adjacent dimensions, ours pairs the two halves of a head): the inverse is applied;
- for Gemma 3 it stores every norm weight as 1 + w (Gemma's RMSNorm multiplies by
  1 + w), which is what our RMSNorm multiplies by: taken as stored.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

from ..model_config import CheckpointError

# GGUF name -> ours (the Qwen2-style names DiffusionTransformer uses).
_LAYER = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    # Gemma 3: q/k norms and the sandwich norms (ffn_norm is the norm before the MLP, as for Llama)
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "post_attention_norm": "post_attn_norm",
    "post_ffw_norm": "post_mlp_norm",
}
ARCHITECTURES = ("llama", "gemma3")
_TOP = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
        "output.weight": "lm_head.weight"}
_BLOCK = re.compile(r"blk\.(\d+)\.(\w+)\.weight$")


def our_name(gguf_name: str) -> str | None:
    if gguf_name in _TOP:
        return _TOP[gguf_name]
    m = _BLOCK.match(gguf_name)
    if m and m.group(2) in _LAYER:
        return f"model.layers.{m.group(1)}.{_LAYER[m.group(2)]}.weight"
    return None


def unpermute_rope_rows(w: np.ndarray, heads: int) -> np.ndarray:
    """Inverse of llama.cpp's `permute(w, n_head)` for q/k weights [heads * D, in]."""
    half = w.shape[0] // heads // 2
    return w.reshape(heads, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def open_gguf(path: Path):
    import gguf  # imported here: only the first load of a GGUF base needs it

    try:
        return gguf.GGUFReader(str(path))
    except (ValueError, OSError) as exc:
        raise CheckpointError(f"{path}: not a readable GGUF file: {exc}") from None


def field(reader, key: str, path: Path, default=None):
    f = reader.fields.get(key)
    if f is None:
        if default is not None:
            return default
        raise CheckpointError(f"{path}: GGUF metadata has no {key!r}")
    return f.contents()


def gguf_dims(reader, path: Path) -> dict:
    """ModelConfig's fields from a GGUF's metadata (sizes, RoPE, and Gemma 3's options)."""
    a = field(reader, "general.architecture", path)
    if a not in ARCHITECTURES:
        raise CheckpointError(f"{path}: GGUF architecture {a!r}; this loader reads {', '.join(ARCHITECTURES)}")
    heads = int(field(reader, f"{a}.attention.head_count", path))
    vocab = reader.fields.get(f"{a}.vocab_size")
    hidden = int(field(reader, f"{a}.embedding_length", path))
    head_dim = reader.fields.get(f"{a}.attention.key_length")
    dims = dict(
        vocab_size=int(vocab.contents()) if vocab is not None else len(field(reader, "tokenizer.ggml.tokens", path)),
        hidden_size=hidden,
        num_layers=int(field(reader, f"{a}.block_count", path)),
        num_heads=heads,
        num_kv_heads=int(field(reader, f"{a}.attention.head_count_kv", path, heads)),
        intermediate_size=int(field(reader, f"{a}.feed_forward_length", path)),
        head_dim=int(head_dim.contents()) if head_dim is not None else 0,
        rope_theta=float(field(reader, f"{a}.rope.freq_base", path, 10000.0)),
        rms_norm_eps=float(field(reader, f"{a}.attention.layer_norm_rms_epsilon", path, 1e-6)),
        max_position_embeddings=int(field(reader, f"{a}.context_length", path, 2048)),
        tie_word_embeddings=not any(t.name == "output.weight" for t in reader.tensors),
    )
    if a == "gemma3":  # the options of transformers' Gemma3TextConfig the GGUF does not carry
        dims.update(qk_norm=True, hidden_act="gelu_tanh", embed_scale=hidden ** 0.5, sandwich_norm=True,
                    rope_local_theta=10000.0, global_every=6,
                    sliding_window=int(field(reader, f"{a}.attention.sliding_window", path, 512)))
    return dims


def read_state(path: Path, reader, dtype: torch.dtype,
               q4_1_blocks: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """Our state dict from a Llama or Gemma 3 GGUF, in `dtype` (one tensor at a time).
    With `q4_1_blocks`, every Q4_1 tensor's own blocks (q, step, low: weight_only.py) go
    there too, from the float32 values before `dtype` rounds them."""
    import gguf

    from ..weight_only import pack_nibbles, q4_blocks

    arch = field(reader, "general.architecture", path)
    if arch not in ARCHITECTURES:
        raise CheckpointError(f"{path}: GGUF architecture {arch!r}; this loader reads {', '.join(ARCHITECTURES)}")
    permute = arch == "llama"
    heads = int(field(reader, f"{arch}.attention.head_count", path))
    kv_heads = int(field(reader, f"{arch}.attention.head_count_kv", path, heads))
    state: dict[str, torch.Tensor] = {}
    for t in reader.tensors:
        name = our_name(t.name)
        if name is None:
            if t.name.endswith("rope_freqs.weight"):
                continue  # plain RoPE: recomputed from the config
            raise CheckpointError(f"{path}: unexpected GGUF tensor {t.name!r}")
        arr = gguf.quants.dequantize(t.data, t.tensor_type)
        arr = np.asarray(arr, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])
        if permute and ".q_proj." in name:
            arr = unpermute_rope_rows(arr, heads)
        elif permute and ".k_proj." in name:
            arr = unpermute_rope_rows(arr, kv_heads)
        full = torch.from_numpy(np.array(arr, copy=True))  # the reader's arrays are read-only mmap views
        if q4_1_blocks is not None and t.tensor_type == gguf.GGMLQuantizationType.Q4_1 and name.endswith(".weight"):
            q, step, low = q4_blocks(full)
            key = name[: -len(".weight")]
            q4_1_blocks.update({f"{key}.q": pack_nibbles(q), f"{key}.step": step, f"{key}.low": low})
        state[name] = full.to(dtype)
    return state
