"""Server parts without the protocol: cache, scheduler, placeholders, diagnostics, document trees."""

from __future__ import annotations

import asyncio
import random

from lsprotocol import types

from dllm_lsp.server.diagnostics import SuspiciousToken, select, to_diagnostics
from dllm_lsp.server.documents import DocumentStore
from dllm_lsp.server.holes import find_placeholders
from dllm_lsp.server.scheduler import RequestScheduler
from dllm_lsp.server.suggestion_cache import CachedSuggestion, SuggestionCache
from dllm_lsp.syntax.languages import language_for, parse


def test_cache_follows_typing_through_a_suggestion():
    cache = SuggestionCache()
    text = "def f(x):\n    return \n"
    cache.put("u", text, 21, CachedSuggestion("x + 1)", 1))
    assert cache.get("u", text, 21) == CachedSuggestion("x + 1)", 1)
    typed = text[:21] + "x +" + text[21:]
    assert cache.get("u", typed, 24) == CachedSuggestion(" 1)", 1)
    wrong = text[:21] + "y" + text[21:]
    assert cache.get("u", wrong, 22) is None  # typed something else
    assert cache.get("u", typed.replace("\n", " \n", 2), 25) is None  # the text after changed
    assert cache.get("other", typed, 24) is None


def test_cache_is_bounded():
    cache = SuggestionCache(capacity=3)
    for i in range(5):
        cache.put("u", f"x{i} = ", 5, CachedSuggestion("1", 0))
    assert cache.get("u", "x0 = ", 5) is None and cache.get("u", "x4 = ", 5) is not None


async def test_scheduler_supersedes_and_counts():
    scheduler = RequestScheduler(debounce_s=0.0)
    started = asyncio.Event()
    cancelled = []

    async def slow():
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def quick():
        return "done"

    first = asyncio.ensure_future(scheduler.run("doc", slow))
    await started.wait()
    assert await scheduler.run("doc", quick) == "done"
    assert await first is None and cancelled == [True]
    assert scheduler.stats.superseded_in_engine == 1 and scheduler.stats.completed == 1


async def test_scheduler_propagates_a_client_cancel():
    scheduler = RequestScheduler(debounce_s=0.0)
    inner_cancelled = asyncio.Event()

    async def slow():
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            inner_cancelled.set()
            raise

    handler = asyncio.ensure_future(scheduler.run("doc", slow))
    await asyncio.sleep(0.01)
    handler.cancel()
    try:
        await handler
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("the handler should end cancelled")
    assert inner_cancelled.is_set() and scheduler.stats.client_cancelled == 1


def test_placeholders_are_whole_body_lines():
    text = ("def a():\n    pass\n\nclass B:\n    ...\n\nx = f(...)\nif x:\n    y = 1\n    pass\n"
            "fn c() {\n    todo!()\n}\n    {{fill}}\n")
    found = [(p.text, text[p.start:p.end]) for p in find_placeholders(text, "{{fill}}")]
    assert found == [("pass", "pass"), ("...", "..."), ("todo!()", "todo!()"), ("{{fill}}", "{{fill}}")]


def test_diagnostics_from_suspicious_tokens():
    text = "def f(x):\n    return y\n"
    tokens = [SuspiciousToken(21, 22, 0.001, "x", 0.93), SuspiciousToken(4, 5, 0.2, "g", 0.9)]
    [diagnostic] = to_diagnostics(text, select(tokens), "utf-16")
    assert diagnostic.range == types.Range(start=types.Position(line=1, character=11),
                                           end=types.Position(line=1, character=12))
    assert diagnostic.severity == types.DiagnosticSeverity.Hint and diagnostic.data == {"replacement": "x"}


def _tree_sexp(tree) -> str:
    return str(tree.root_node)


def test_incremental_changes_keep_the_tree_equal_to_a_fresh_parse():
    rng = random.Random(7)
    store = DocumentStore()
    text = "def f(a, b):\n    s = 'héllo 😀'\n    return a + b\n\nclass C:\n    x = [1, 2]\n"
    doc = store.open(types.TextDocumentItem(uri="file:///t.py", language_id="python", version=1, text=text))
    pieces = ["x", "(", ")", ":", "\n    ", "😀", "中", "'", "def g():\n    pass\n", ""]
    for version in range(2, 80):
        index = doc.index
        a, b = sorted(rng.randrange(len(doc.text) + 1) for _ in range(2))
        rng_ = index.range(a, b)
        store.change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=doc.uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(range=rng_, text=rng.choice(pieces))]), "utf-16")
        expected = doc.text
        assert doc.tree.text == expected
        assert _tree_sexp(doc.tree.tree) == _tree_sexp(parse(expected, language_for("x.py")))
