"""Special token ids from a checkpoint folder: config.json, generation_config.json
and the tokenizer files (tokenizer.json, tokenizer_config.json, special_tokens_map.json).

Never literals: every family names the *texts* or config keys it looks for, and
this module finds their ids in whatever files the checkpoint ships.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..model_config import CheckpointError


def _read_json(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: not valid JSON: {exc}") from None
    return data if isinstance(data, dict) else {}


def _first_int(value: Any) -> int | None:
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class SpecialTokens:
    """Token text -> id for the added/special tokens, plus the named roles (mask, pad, ...)."""

    def __init__(self, folder: Path, raw_config: dict, placeholder_missing: bool = False) -> None:
        # placeholder_missing: `require` answers 0 for an id it cannot find and records it in
        # `unresolved` (for `model logits`, which needs no special ids at all).
        self.placeholder_missing = placeholder_missing
        self.unresolved: set[str] = set()
        self.folder = folder
        self.config = raw_config
        self.generation = _read_json(folder / "generation_config.json")
        self.by_text: dict[str, int] = {}
        tok = _read_json(folder / "tokenizer.json")
        for entry in tok.get("added_tokens", []) or []:
            if isinstance(entry, dict) and isinstance(entry.get("id"), int):
                self.by_text[str(entry.get("content"))] = entry["id"]
        vocab = (tok.get("model") or {}).get("vocab")
        self._vocab = vocab if isinstance(vocab, dict) else {}
        for text, tid in _read_json(folder / "added_tokens.json").items():  # slow-tokenizer releases (CoDA)
            if isinstance(tid, int):
                self.by_text.setdefault(text, tid)
        tok_cfg = _read_json(folder / "tokenizer_config.json")
        for tid, entry in (tok_cfg.get("added_tokens_decoder") or {}).items():
            if isinstance(entry, dict) and str(tid).isdigit():
                self.by_text.setdefault(str(entry.get("content")), int(tid))
        # Role -> text, from special_tokens_map.json, then tokenizer_config.json.
        self.roles: dict[str, str] = {}
        for source in (_read_json(folder / "special_tokens_map.json"), tok_cfg):
            for role in ("mask_token", "pad_token", "eos_token", "bos_token"):
                value = source.get(role)
                if isinstance(value, dict):
                    value = value.get("content")
                if isinstance(value, str):
                    self.roles.setdefault(role, value)

    def id_of_text(self, text: str) -> int | None:
        if text in self.by_text:
            return self.by_text[text]
        value = self._vocab.get(text)
        return value if isinstance(value, int) else None

    def find(self, config_keys: tuple[str, ...] = (), role: str | None = None, texts: tuple[str, ...] = ()) -> int | None:
        """First hit of: a config.json / generation_config.json key, a tokenizer role, a known token text."""
        for key in config_keys:
            for source in (self.config, self.generation):
                tid = _first_int(source.get(key))
                if tid is not None and tid >= 0:
                    return tid
        if role and role in self.roles:
            tid = self.id_of_text(self.roles[role])
            if tid is not None:
                return tid
        for text in texts:
            tid = self.id_of_text(text)
            if tid is not None:
                return tid
        return None

    def all_ids(self, key: str) -> set[int]:
        """Every id under `key` in config.json and generation_config.json (eos_token_id is often a list)."""
        out: set[int] = set()
        for source in (self.config, self.generation):
            value = source.get(key)
            for v in value if isinstance(value, list) else [value]:
                if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                    out.add(v)
        return out

    def end_ids(self, *ids: int | None) -> list[int]:
        """Tokens that end a fill: the given ids, every configured EOS, and the chat end marker if present."""
        found = {i for i in ids if i is not None} | self.all_ids("eos_token_id")
        im_end = self.find(texts=("<|im_end|>",))
        return sorted(found | ({im_end} if im_end is not None else set()))

    def require(self, what: str, **kwargs) -> int:
        tid = self.find(**kwargs)
        if tid is None and self.placeholder_missing:
            self.unresolved.add(what)
            return 0
        if tid is None:
            looked = ", ".join([*kwargs.get("config_keys", ()), *kwargs.get("texts", ())])
            raise CheckpointError(
                f"{self.folder / 'config.json'}: cannot find the {what} id (looked for {looked} in config.json, "
                "generation_config.json and the tokenizer files)"
            )
        return tid
