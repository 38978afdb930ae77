"""A `tokenizer.json` from a GGUF file's own metadata (vocabulary, merges, pre-tokenizer).

transformers ships the converter from llama.cpp's tokenizer metadata to a
Hugging Face fast tokenizer (what `AutoTokenizer.from_pretrained(..., gguf_file=)`
uses); we run it once, at the first load of a base, and keep only the
`tokenizers` JSON it writes (the engine reads that with `tokenizers`, no transformers).
"""

from __future__ import annotations

from pathlib import Path

from ..model_config import CheckpointError


def write_tokenizer_json(gguf_path: Path, out: Path) -> None:
    from transformers.integrations.gguf import convert_gguf_tokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    info = load_gguf_checkpoint(str(gguf_path), return_tensors=False)
    arch = info["config"].get("model_type")
    try:
        tok, _ = convert_gguf_tokenizer(arch, info["tokenizer"])
    except (KeyError, ValueError) as exc:
        raise CheckpointError(f"{gguf_path}: cannot build a tokenizer from its GGUF metadata: {exc}") from None
    if not info["tokenizer"].get("add_prefix_space", False):
        tok = without_dummy_prefix(tok)
    tok.save(str(out))


def without_dummy_prefix(tok):
    """A SentencePiece-style tokenizer whose GGUF says `add_space_prefix: false` (Gemma 3):
    the converter still prepends "▁" to the first word and strips a leading space when
    decoding, which would put a space before every prefix and suffix we encode apart and
    drop the space of every token decoded alone (token healing, stop strings)."""
    import json

    from tokenizers import Tokenizer

    spec = json.loads(tok.to_str())
    pre = spec.get("pre_tokenizer") or {}
    if pre.get("type") == "Metaspace":
        pre["prepend_scheme"] = "never"
    dec = spec.get("decoder") or {}
    if dec.get("type") == "Sequence":
        dec["decoders"] = [d for d in dec["decoders"] if d.get("type") != "Strip"]
    return Tokenizer.from_str(json.dumps(spec))
