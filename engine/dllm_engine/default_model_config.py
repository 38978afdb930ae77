"""The shape of the embedded default model (see default_model/MODEL_CARD.md)."""

from __future__ import annotations

from .model_config import ModelConfig
from .tokenizer import TextTokenizer


def default_model_config(tokenizer: TextTokenizer, **overrides) -> ModelConfig:
    ids = {name: tokenizer.token_id(tok) for name, tok in
           (("pad_token_id", "<pad>"), ("mask_token_id", "<mask>"), ("eos_token_id", "<eos>"),
            ("suffix_token_id", "<suf>"), ("prefix_token_id", "<pre>"))}
    base = dict(
        vocab_size=tokenizer.vocab_size,
        hidden_size=256,
        num_layers=6,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=704,
        rope_theta=10000.0,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        attention="native",
        family="native",
        **ids,
    )
    base.update(overrides)
    return ModelConfig(**base)
