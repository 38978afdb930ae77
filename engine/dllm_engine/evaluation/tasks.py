"""Evaluation tasks: HumanEval infilling (pass@1) and a held-out FIM set (exact match).

HumanEval infilling (Bavarian et al. 2022) ships one jsonl.gz per benchmark:
single-line, multi-line and random-span holes cut from the canonical
solutions, each with the test program. The held-out set is cut, with a fixed
seed, from the manifest's held-out files: code the model never trained on.
"""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass
from pathlib import Path

HUMANEVAL_FILES = {
    "single-line": "HumanEval-SingleLineInfilling.jsonl.gz",
    "multi-line": "HumanEval-MultiLineInfilling.jsonl.gz",
    "random-span": "HumanEval-RandomSpanInfilling.jsonl.gz",
    "random-span-light": "HumanEval-RandomSpanInfillingLight.jsonl.gz",
}
DEFAULT_DATA_DIR = Path("/work/shared/data/human-eval-infilling")


@dataclass(frozen=True)
class Task:
    task_id: str
    benchmark: str  # single-line, multi-line, random-span, heldout-line, ...
    prefix: str
    suffix: str
    middle: str  # the reference fill
    test: str = ""  # HumanEval test program (defines check(candidate)); empty for held-out tasks
    entry_point: str = ""

    @property
    def executable(self) -> bool:
        return bool(self.test)

    def program(self, fill: str) -> str:
        """The whole file with `fill` in the hole, then the tests (HumanEval's own harness layout)."""
        src = self.prefix + fill + self.suffix
        if not self.test:
            return src
        return src + "\n\n" + self.test + f"\n\ncheck({self.entry_point})\n"


def sample(items: list, limit: int | None, stride: int | None) -> list:
    """Every `stride`-th item, then the first `limit` of those (deterministic, spread over the set)."""
    if stride and stride > 1:
        items = items[::stride]
    if limit:
        items = items[:limit]
    return items


def load_humaneval(benchmark: str, data_dir: Path = DEFAULT_DATA_DIR, limit: int | None = None,
                   stride: int | None = None) -> list[Task]:
    if benchmark not in HUMANEVAL_FILES:
        raise ValueError(f"unknown benchmark {benchmark!r}; choose from {sorted(HUMANEVAL_FILES)}")
    path = Path(data_dir) / HUMANEVAL_FILES[benchmark]
    if not path.exists():
        raise FileNotFoundError(f"{path}: HumanEval infilling data not found (pass --data-dir)")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    tasks = [Task(task_id=r["task_id"], benchmark=benchmark, prefix=r["prompt"], suffix=r["suffix"],
                  middle=r["canonical_solution"], test=r["test"], entry_point=r["entry_point"]) for r in rows]
    return sample(tasks, limit, stride)


def _nonblank(line: str) -> bool:
    return bool(line.strip())


HELDOUT_KINDS = ("heldout-line", "heldout-lines", "heldout-span")


def cut_heldout(sources: list[tuple[str, str]], count: int, seed: int = 0) -> list[Task]:
    """`count` holes over (name, text) sources, a third each: one whole line, 2-4 whole lines, a character span."""
    rng = random.Random(seed)
    texts = [(name, text) for name, text in sorted(sources) if text.count("\n") >= 20]
    if not texts:
        raise ValueError("no usable held-out files (need at least 20 lines)")
    tasks: list[Task] = []
    seen: set[str] = set()
    draws = 0
    while len(tasks) < count:
        draws += 1
        if draws > 100 * count:
            raise ValueError(f"only {len(tasks)} distinct held-out holes found, {count} asked")
        name, text = texts[rng.randrange(len(texts))]
        kind = HELDOUT_KINDS[len(tasks) % 3]
        lines = text.splitlines(keepends=True)
        if kind == "heldout-span":
            start = rng.randrange(len(text) - 1)
            end = min(len(text), start + rng.randint(1, 120))
        else:
            i = rng.randrange(len(lines))
            n = 1 if kind == "heldout-line" else rng.randint(2, 4)
            if not all(_nonblank(ln) for ln in lines[i:i + n]) or i + n > len(lines):
                continue
            start = sum(len(ln) for ln in lines[:i])
            end = start + sum(len(ln) for ln in lines[i:i + n])
        middle = text[start:end]
        # The id names the file as the source does (a path under --heldout-dir, not its base name:
        # two `serve.py`), and no hole is drawn twice: 8 of 600 holes of dllm_lsp/ were, counted
        # twice in a rate and paired as one task.
        task_id = f"{name}:{start}-{end}"
        if not middle.strip() or task_id in seen:
            continue
        seen.add(task_id)
        tasks.append(Task(task_id=task_id, benchmark=kind, prefix=text[:start], suffix=text[end:], middle=middle))
    return tasks


def folder_sources(folder: Path) -> list[tuple[str, str]]:
    """(name, text) of every Python file under `folder` (sorted, so the holes are reproducible)."""
    out = []
    for path in sorted(folder.rglob("*.py")):
        try:
            out.append((str(path.relative_to(folder)), path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue
    if not out:
        raise ValueError(f"{folder}: no Python files")
    return out


def heldout_sources(manifest_path: Path | None = None, token_dir: Path | None = None) -> list[tuple[str, str]]:
    """(name, text) of the held-out files: decoded from a held-out token file (it travels with the
    training data, e.g. to a GPU machine), else read from the manifest (rebuilt from the stdlib if absent)."""
    if token_dir is not None:
        from ..tokenizer import TextTokenizer
        from ..training.token_data import TokenCorpus

        corpus = TokenCorpus.open(token_dir)
        tok_path = Path(corpus.meta["tokenizer"])
        if not tok_path.exists():
            from ..checkpoint import SMALL_MODEL_DIR

            tok_path = SMALL_MODEL_DIR / "tokenizer.json"
        tok = TextTokenizer(tok_path)
        names = corpus.meta.get("files") or [f"file{i}" for i in range(corpus.num_files)]
        return [(names[i], tok.decode(corpus.file(i).tolist())) for i in range(corpus.num_files)]
    from ..training.corpus import build_manifest, default_roots, read_manifest

    manifest = read_manifest(manifest_path) if manifest_path else build_manifest(default_roots())
    out = []
    for path in manifest["heldout"]:
        try:
            out.append((path, Path(path).read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue
    return out
