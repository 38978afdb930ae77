"""ModelConfig: one dataclass that describes every transformer the engine runs.

The native dllm-lsp model and the public checkpoints (LLaDA, Dream, CoDA, ...)
differ only in options here, not in code: q/k/v bias, per-head q/k norm, tied
head, same-position or shifted logits, and how attention is laid out.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

# native: context causal in suffix-then-prefix order, canvas bidirectional over
#         context + canvas, context never sees the canvas (exact context cache).
# bidirectional: every token sees every token (LLaDA, Dream, CoDA).
# block: causal between blocks, bidirectional inside a block (SDAR, Fast-dLLM v2).
# encoder_decoder: a causal prompt encoder whose K/V a bidirectional canvas decoder reads
#                  (DiffusionGemma, run through transformers' own class, not DiffusionTransformer).
AttentionLayout = Literal["native", "bidirectional", "block", "encoder_decoder"]


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded; the message names the file and the tensor."""


@dataclass
class ModelConfig:
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    head_dim: int = 0  # 0: hidden_size // num_heads
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 4096
    qkv_bias: bool = False
    qk_norm: bool = False
    tie_word_embeddings: bool = True
    # Shifted logits: the prediction for position i comes from hidden state i-1 (Dream, CoDA).
    logits_shift: bool = False
    attention: AttentionLayout = "native"
    block_size: int = 0  # for attention == "block"
    family: str = "native"
    # Special token ids, read from the checkpoint (never literals in code).
    mask_token_id: int = -1
    pad_token_id: int = -1
    eos_token_id: int = -1
    # Native layout markers: <suf> suffix <pre> prefix canvas.
    suffix_token_id: int = -1
    prefix_token_id: int = -1
    # Native layout, optional: a document-start token before the context (a pretrained
    # base expects one: <bos>, <|endoftext|>), and block decoding of the canvas: blocks of
    # `decode_block` slots, causal between blocks and bidirectional inside one, committed
    # left to right (0: the whole canvas is one block). With `logits_shift` and blocks of 1
    # this is the base's own left-to-right decoding, after reading the suffix first.
    bos_token_id: int = -1
    decode_block: int = 0
    # Gemma-style bases: GeGLU (gelu with the tanh approximation) instead of SwiGLU; the
    # embeddings scaled by sqrt(hidden) (a tied head cannot fold it into the weights); a
    # norm after attention and after the MLP too (sandwich); two RoPE bases, the local one
    # on every layer but each `global_every`-th. `sliding_window`: the local layers' span;
    # the runner keeps every request inside it, so no layer ever needs the window mask.
    hidden_act: str = "silu"
    embed_scale: float = 1.0
    sandwich_norm: bool = False
    rope_local_theta: float = 0.0
    global_every: int = 0
    sliding_window: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._check_types()
        if self.head_dim == 0:
            if self.hidden_size % self.num_heads:
                raise CheckpointError(f"hidden_size {self.hidden_size} not divisible by num_heads {self.num_heads}")
            self.head_dim = self.hidden_size // self.num_heads
        if self.num_heads % self.num_kv_heads:
            raise CheckpointError(f"num_heads {self.num_heads} not a multiple of num_kv_heads {self.num_kv_heads}")
        if self.attention not in ("native", "bidirectional", "block", "encoder_decoder"):
            raise CheckpointError(f"unknown attention layout {self.attention!r}")
        if self.attention == "block" and self.block_size <= 0:
            raise CheckpointError("attention 'block' needs block_size > 0")
        if self.hidden_act not in ("silu", "gelu_tanh"):
            raise CheckpointError(f"hidden_act must be silu or gelu_tanh, got {self.hidden_act!r}")
        if self.decode_block < 0:
            raise CheckpointError(f"decode_block must be >= 0, got {self.decode_block}")
        if self.mask_token_id < 0:
            raise CheckpointError("config has no mask_token_id")

    def _check_types(self) -> None:
        """Every number is a number of the right kind and every special id is in the vocabulary,
        so a bad config.json is one clear error here, not a torch TypeError at build time or an
        IndexError at the first fill."""
        for f in fields(self):
            value, kind = getattr(self, f.name), f.type
            if kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
                raise CheckpointError(f"{f.name} must be an integer, got {value!r}")
            if kind == "float" and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise CheckpointError(f"{f.name} must be a number, got {value!r}")
            if kind == "bool" and not isinstance(value, bool):
                raise CheckpointError(f"{f.name} must be true or false, got {value!r}")
        if not isinstance(self.extra, dict):
            raise CheckpointError(f"extra must be an object, got {type(self.extra).__name__}")
        for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "num_kv_heads", "intermediate_size"):
            if getattr(self, name) <= 0:
                raise CheckpointError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("mask_token_id", "pad_token_id", "eos_token_id", "suffix_token_id", "prefix_token_id",
                     "bos_token_id"):
            if getattr(self, name) >= self.vocab_size:
                raise CheckpointError(f"{name} {getattr(self, name)} is outside the vocabulary of {self.vocab_size}")

    @property
    def num_params(self) -> int:
        if "num_params" in self.extra:  # counted from the loaded model (families not built from these fields)
            return int(self.extra["num_params"])
        d, h, kv, hd, f, v, n = (self.hidden_size, self.num_heads, self.num_kv_heads, self.head_dim,
                                 self.intermediate_size, self.vocab_size, self.num_layers)
        per_layer = d * hd * (h + 2 * kv) + h * hd * d + 3 * d * f + (4 if self.sandwich_norm else 2) * d
        return n * per_layer + v * d * (1 if self.tie_word_embeddings else 2) + d

    def to_json(self) -> dict[str, Any]:
        return {"dllm_lsp_config": asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelConfig":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")
