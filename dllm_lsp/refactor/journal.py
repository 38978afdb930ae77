"""`--journal FILE`: remember which files a recipe already rewrote, so a rerun skips them.

Most recipes resume by themselves (a filled hole no longer matches), but
`regenerate` re-masks its matches on every run; with a journal an interrupted
run resumes where it stopped. One JSON line per written file: the recipe's
fingerprint, the path and the hash of the bytes written. A file is skipped
only while it still has exactly those bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading

from dllm_lsp.refactor.recipes import Recipe


def recipe_fingerprint(recipe: Recipe) -> str:
    return hashlib.sha256(repr((recipe.name, recipe.max_tokens, recipe.rules)).encode()).hexdigest()[:16]


class Journal:
    def __init__(self, path: str, recipe: Recipe) -> None:
        self.path = path
        self.recipe = recipe_fingerprint(recipe)
        self._lock = threading.Lock()
        self._done: dict[str, str] = {}
        try:
            with open(path, encoding="utf-8") as f:
                for line in f:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue  # a line cut by a kill: that file is simply redone
                    if isinstance(entry, dict) and entry.get("recipe") == self.recipe:
                        self._done[entry.get("path")] = entry.get("sha256")
        except FileNotFoundError:
            pass

    def __getstate__(self):  # travels to Ray workers; the lock does not
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @staticmethod
    def _key(path: str) -> str:
        return os.path.realpath(path)

    def done(self, path: str, sha256: str) -> bool:
        """True when this recipe wrote ``path`` and it still has the bytes it wrote."""
        return self._done.get(self._key(path)) == sha256

    def record(self, path: str, data: bytes) -> None:
        entry = {"recipe": self.recipe, "path": self._key(path), "sha256": hashlib.sha256(data).hexdigest()}
        with self._lock:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(entry) + "\n")
                f.flush()
                os.fsync(f.fileno())
            self._done[entry["path"]] = entry["sha256"]
