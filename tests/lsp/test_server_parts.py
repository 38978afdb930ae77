"""Server parts without the protocol: cache, scheduler, placeholders, diagnostics, document trees."""

from __future__ import annotations

import asyncio
import random

from lsprotocol import types

from dllm_lsp.server.diagnostics import SuspiciousToken, select, to_diagnostics
from dllm_lsp.server.documents import DocumentStore
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


def test_placeholders_come_from_the_refactor_recipes():
    from dllm_lsp.refactor.apply import HoleFill
    from dllm_lsp.server.options import ServerOptions
    from dllm_lsp.server.placeholders import apply_fills, line_edits, plan_placeholders

    text = ('def a():\n    pass\n\n\ndef b():\n    """Doc."""\n    ...\n\n\nx = f(...)\n\n\n'
            'def c():\n    y = 1\n    pass\n\n\n{{fill}}\n')
    store = DocumentStore()
    doc = store.open(types.TextDocumentItem(uri="file:///p.py", language_id="python", version=1, text=text))
    plan = plan_placeholders(doc, ServerOptions())
    assert [text[h.start:h.end] for h in plan.holes] == ["pass", "...", "{{fill}}"]
    new_text, filled = apply_fills(plan, [HoleFill("return 1", 1, "end", 1.0), None, HoleFill("", 1, "end", 1.0)])
    assert filled == 1  # no fill for the second; the third is empty (dropped by shaping)
    assert new_text == text.replace("    pass\n\n\ndef b", "    return 1\n\n\ndef b", 1)
    [edit] = line_edits(text, new_text, "utf-16")
    assert edit.range == types.Range(start=types.Position(line=1, character=0), end=types.Position(line=2, character=0))
    assert edit.new_text == "    return 1\n"


def test_diagnostics_from_suspicious_tokens():
    text = "def f(x):\n    return y\n"
    tokens = [SuspiciousToken(21, 22, 0.001, "x", 0.93), SuspiciousToken(4, 5, 0.2, "g", 0.9)]
    [diagnostic] = to_diagnostics(text, select(tokens, min_alternative=0.5), "utf-16")
    assert diagnostic.range == types.Range(start=types.Position(line=1, character=11),
                                           end=types.Position(line=1, character=12))
    assert diagnostic.severity == types.DiagnosticSeverity.Hint and diagnostic.data == {"replacement": "x"}


def test_blank_tokens_are_never_suspicious():
    """A span's first and last tokens split a line break from its indentation, which the
    default model's tokenizer never does: unlikely wherever they stand, they are no typo."""
    from dllm_engine.protocol import TokenScore

    from dllm_lsp.server.diagnostics import suspicious_tokens

    text = "x = 1\n" * 20 + "    totl\n"
    scores = [TokenScore(0, 4, "    ", 0.0001, "\n    ", 0.95), TokenScore(4, 8, "totl", 0.0002, "total", 0.9),
              TokenScore(8, 9, "\n", 0.0001, "\n    ", 0.97)]
    assert [(t.start, t.end) for t in select(suspicious_tokens(scores, 120, text))] == [(124, 128)]


def test_a_misspelled_name_is_one_diagnostic_whose_fix_is_the_name():
    """`queyr` is three tokens; the model prefers `query` at the first (the default model's own
    scores for such a typo, benchmarks/bench_scoring.py): one hint over the whole name, and its
    quick fix puts `query` in place of `queyr`, not in place of `qu`."""
    from dllm_engine.protocol import TokenScore

    from dllm_lsp.server.diagnostics import suspicious_tokens

    text = "def run(query):\n    return sorted(queyr)\n"
    start = text.index("    return")
    span = text[start:]
    at = span.index("queyr")
    scores = [TokenScore(at, at + 2, "qu", 0.0001, "query", 0.603), TokenScore(at + 2, at + 4, "ey", 0.00001, "x", 0.434),
              TokenScore(at + 4, at + 5, "r", 0.0009, "`", 0.621)]
    [found] = select(suspicious_tokens(scores, start, text))
    assert (text[found.start:found.end], found.alternative, found.misspelling) == ("queyr", "query", True)
    [diagnostic] = to_diagnostics(text, [found], "utf-16")
    assert diagnostic.data == {"replacement": "query"}
    assert diagnostic.range == types.Range(start=types.Position(line=1, character=18),
                                           end=types.Position(line=1, character=23))


def test_a_different_name_is_not_a_misspelling():
    """The model preferring another name (`options` for `documents`) is a guess, not a typo: it
    needs a far more confident model than a near spelling does."""
    from dllm_engine.protocol import TokenScore

    from dllm_lsp.server.diagnostics import suspicious_tokens

    text = "x = ls.documents.get(uri)\n"
    at = text.index("documents")
    [token] = suspicious_tokens([TokenScore(at, at + 9, "documents", 0.00001, "options", 0.81)], 0, text)
    assert not token.misspelling and (token.start, token.end, token.alternative) == (at, at + 9, "options")
    assert select([token]) == []
    spelled = suspicious_tokens([TokenScore(at, at + 9, "documents", 0.00001, "document", 0.81)], 0, text)
    assert [t.alternative for t in select(spelled)] == ["document"]


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


async def test_inflight_engine_call_is_shared_and_cancelled_by_the_last_waiter():
    from dllm_lsp.server.inflight import InflightRequests

    inflight = InflightRequests()
    calls, cancelled = [], asyncio.Event()

    async def engine():
        calls.append(1)
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    a = asyncio.ensure_future(inflight.run("k", engine))
    b = asyncio.ensure_future(inflight.run("k", engine))
    await asyncio.sleep(0.01)
    assert calls == [1] and inflight.joined == 1
    a.cancel()
    await asyncio.sleep(0.01)
    assert not cancelled.is_set()  # b still wants it
    b.cancel()
    await asyncio.sleep(0.01)
    assert cancelled.is_set()

    async def quick():
        return 42

    assert await asyncio.gather(inflight.run("q", quick), inflight.run("q", quick)) == [42, 42]


def test_changed_region_covers_whole_lines_around_the_edit():
    from dllm_lsp.server.diagnostics import changed_region

    old = "".join(f"line {i}\n" for i in range(40))
    new = old.replace("line 20\n", "line twenty\n")
    start, end = changed_region(old, new)
    region = new[start:end]
    assert "line twenty\n" in region and region.startswith("line 1") and region.endswith("\n")
    assert region.count("\n") <= 2 * 4 + 1
    assert changed_region(new, new) is None
    first = changed_region(None, "x = 1\n" * 2000)
    assert first[0] == 0 and first[1] <= 3000


def test_findings_outside_the_region_are_kept_and_shifted():
    from dllm_lsp.server.diagnostics import SuspiciousToken, merge_findings

    old = "aaa\nbbb\nccc\n"
    new = "aaa\nbbbbbb\nccc\n"
    kept = [SuspiciousToken(0, 3, 0.001, "x", 0.9), SuspiciousToken(4, 7, 0.001, "y", 0.9),
            SuspiciousToken(8, 11, 0.001, "z", 0.9)]
    fresh = [SuspiciousToken(5, 8, 0.002, "q", 0.8)]
    merged = merge_findings(kept, old, new, (4, 11), fresh)
    assert [(t.start, t.end, t.alternative) for t in merged] == [(0, 3, "x"), (5, 8, "q"), (11, 14, "z")]


async def test_status_is_sent_on_changes_and_latency_at_most_every_few_seconds(monkeypatch):
    """Issue 16: dllm/status "ready" was re-sent on every request (86 in 60 s)."""
    from dllm_engine.clients import EngineClient
    from dllm_engine.protocol import Hole, HoleResult, InfillRequest, InfillResult

    from dllm_lsp.server import engine_manager
    from dllm_lsp.server.options import EngineOptions

    class Fake(EngineClient):
        async def infill(self, request, on_event=None):
            return InfillResult(request.request_id, [HoleResult("x", "end", 1, 1)], "fake", 1.0)

        async def health(self):
            return {"status": "ok"}

    clock = [1000.0]
    monkeypatch.setattr(engine_manager.time, "monotonic", lambda: clock[0])
    sent = []
    manager = engine_manager.EngineManager(EngineOptions(mode="openai", url="http://x", openai_model="m"),
                                           sent.append, lambda message: None, factory=lambda options: Fake())
    for _ in range(20):
        assert await manager.infill(InfillRequest(holes=[Hole(prefix="a")])) is not None
        clock[0] += 0.1
    assert [s.state for s in sent] == ["ready"]  # the change, not one per request
    clock[0] += engine_manager.LATENCY_STATUS_EVERY_S
    await manager.infill(InfillRequest(holes=[Hole(prefix="a")]))
    assert len(sent) == 2 and sent[-1].last_latency_ms is not None
    assert manager.status.last_latency_ms is not None  # always current for dllm.engineStatus


def test_a_prefetched_entry_is_counted_once_when_served_at_its_place():
    cache = SuggestionCache()
    text = "def f(x):\n    y = 1\n    \n"
    cache.put("u", text, 24, CachedSuggestion("return y", 0, prefetched=True))
    assert cache.has("u", text, 24) and cache.prefetch_served == 0  # looking does not count
    assert cache.get("u", text, 24) == CachedSuggestion("return y", 0, True) and cache.prefetch_served == 1
    typed = text[:24] + "ret" + text[24:]
    assert cache.get("u", typed, 27).text == "urn y" and cache.prefetch_served == 1  # typing through it
    whole = text[:24] + "return y" + text[24:]
    # Typed to its line's end: "nothing more on this line" (Enter comes next).
    assert cache.get("u", whole, 32) == CachedSuggestion("", 0, True) and cache.prefetch_served == 1


def test_a_suggestion_typed_all_the_way_answers_nothing_only_at_a_line_end():
    cache = SuggestionCache()
    text = "print()\r\nx = \r\n"
    cache.put("u", text, 6, CachedSuggestion("a, b", 0))  # mid-line: ")" follows
    cache.put("u", text, 13, CachedSuggestion("1", 0))  # before a CRLF line end
    assert cache.get("u", text[:6] + "a," + text[6:], 8) == CachedSuggestion(" b", 0)
    mid = text[:6] + "a, b" + text[6:]
    assert not cache.has("u", mid, 10) and cache.get("u", mid, 10) is None  # what follows "b" is a new question
    end = text[:13] + "1" + text[13:]
    assert cache.get("u", end, 14) == CachedSuggestion("", 0)
    at_eof = "x = "
    cache.put("u", at_eof, 4, CachedSuggestion("2", 0))
    assert cache.get("u", at_eof + "2", 5) == CachedSuggestion("", 0)


def test_an_edited_document_is_detached_from_the_store():
    store = DocumentStore()
    doc = store.open(types.TextDocumentItem(uri="file:///a.py", language_id="python", version=3,
                                            text="def f(x):\n    return x\n"))
    ahead = doc.edited(22, 22, "\n    pass")
    assert ahead.text == "def f(x):\n    return x\n    pass\n" and ahead.version == 3
    assert str(ahead.tree.tree.root_node) == str(parse(ahead.text, doc.language).root_node)
    assert store.get("file:///a.py").text == "def f(x):\n    return x\n"


def test_an_empty_prefetched_entry_answers_nothing_at_its_place_only():
    cache = SuggestionCache()
    text = "def f(x):\n    y = 1\n    \n"
    cache.put("u", text, 24, CachedSuggestion("", 0))  # an empty answer asked for is not kept
    assert not cache.has("u", text, 24)
    cache.put("u", text, 24, CachedSuggestion("", 0, prefetched=True))
    assert cache.get("u", text, 24) == CachedSuggestion("", 0, True)
    assert cache.get("u", text[:24] + "r" + text[24:], 25) is None  # typed on: nothing known there
