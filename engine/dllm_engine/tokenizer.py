"""Tokenizer: `tokenizer.json` through Hugging Face `tokenizers`.

Special ids come from the checkpoint's config and tokenizer (by name), never
as literals: see `resolve_special_ids`.

Text is always text: a file that spells a control token (`<|endoftext|>` in a tokenizer's
own source, `<file_sep>` in a prompt template) encodes as those characters, never as the
token, so no user code ends the model's document early or fakes a layout marker. Control
tokens enter a sequence only by id, where the layout puts them.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer

from .model_config import CheckpointError


class TextTokenizer:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self._tok = Tokenizer.from_file(str(self.path))
        except Exception as exc:  # tokenizers raises a bare Exception on bad JSON
            raise CheckpointError(f"{self.path}: cannot read tokenizer: {exc}") from None
        self._tok.encode_special_tokens = True
        self.vocab_size = self._tok.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        enc = self._tok.encode(text, add_special_tokens=False)
        return enc.ids, enc.offsets

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids, skip_special_tokens=False)

    def token_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    def longest_token_chars(self) -> int:
        """No token decodes to more characters than this (a vocabulary entry spells each
        byte or character of its text with at least one character)."""
        if not hasattr(self, "_longest"):
            self._longest = max(1, max((len(t) for t in self._tok.get_vocab(with_added_tokens=True)), default=1))
        return self._longest


def resolve_special_ids(tokenizer: TextTokenizer | None, names: dict[str, list[str]]) -> dict[str, int]:
    """Find special ids by token text, e.g. {"mask_token_id": ["<mask>", "<|mask|>"]}."""
    found: dict[str, int] = {}
    if tokenizer is None:
        return found
    for key, candidates in names.items():
        for text in candidates:
            tid = tokenizer.token_id(text)
            if tid is not None:
                found[key] = tid
                break
    return found
