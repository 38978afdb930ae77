"""Write a tiny Llama GGUF exactly as llama.cpp's converter lays one out (names, metadata,
q/k rows permuted per head, dimensions innermost first), from a Hugging Face state dict."""

from __future__ import annotations

from pathlib import Path

import numpy as np

_LAYER = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
          "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
          "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def llama_cpp_permute(w: np.ndarray, heads: int) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.permute."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _writer(path: Path, arch: str, cfg, rope_theta: float):
    """A GGUFWriter with the metadata every architecture has, from a transformers config."""
    import gguf

    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(rope_theta)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_vocab_size(cfg.vocab_size)
    return w


def write_llama_gguf(path: Path, cfg, state: dict, quantize_ffn: bool = False) -> None:
    import gguf

    w = _writer(path, "llama", cfg, float((getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", 10000.0)))
    for name, t in state.items():
        arr = t.float().numpy()
        if name == "model.embed_tokens.weight":
            out = "token_embd.weight"
        elif name == "model.norm.weight":
            out = "output_norm.weight"
        elif name == "lm_head.weight":
            if cfg.tie_word_embeddings:
                continue
            out = "output.weight"
        else:
            _, _, i, *rest = name.split(".")
            out = f"blk.{i}.{_LAYER['.'.join(rest[:-1])]}.weight"
            if rest[-2] == "q_proj":
                arr = llama_cpp_permute(arr, cfg.num_attention_heads)
            elif rest[-2] == "k_proj":
                arr = llama_cpp_permute(arr, cfg.num_key_value_heads)
        if quantize_ffn and ".ffn_" in out:
            q = gguf.quants.quantize(arr, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(out, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(out, np.ascontiguousarray(arr, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


_GEMMA_LAYER = {"input_layernorm": "attn_norm", "post_attention_layernorm": "post_attention_norm",
                "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
                "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
                "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
                "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
                "mlp.down_proj": "ffn_down"}


def write_gemma3_gguf(path: Path, cfg, state: dict) -> None:
    """convert_hf_to_gguf.py's Gemma3Model layout: no q/k permutation, every norm weight
    stored as 1 + w, the head tied (no output.weight)."""
    w = _writer(path, "gemma3", cfg, float(cfg.rope_parameters["full_attention"]["rope_theta"]))
    w.add_key_length(cfg.head_dim)
    w.add_value_length(cfg.head_dim)
    w.add_sliding_window(cfg.sliding_window)
    for name, t in state.items():
        arr = t.float().numpy()
        if name == "lm_head.weight":
            continue
        if name.endswith("norm.weight"):
            arr = arr + 1.0
        if name == "model.embed_tokens.weight":
            out = "token_embd.weight"
        elif name == "model.norm.weight":
            out = "output_norm.weight"
        else:
            _, _, i, *rest = name.split(".")
            out = f"blk.{i}.{_GEMMA_LAYER['.'.join(rest[:-1])]}.weight"
        w.add_tensor(out, np.ascontiguousarray(arr, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
