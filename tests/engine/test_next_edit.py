"""Next-edit requests end to end: the real small model in process and behind the daemon's
HTTP app, and a scripted engine for the edge cases a real model cannot be made to hit."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from starlette.testclient import TestClient

from dllm_engine.checkpoint import SMALL_MODEL_DIR
from dllm_engine.clients import InProcessClient
from dllm_engine.daemon import EngineHost, build_app
from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.next_edit import NextEditRequest, NextEditResult, RecentEdit
from dllm_engine.next_edit.region_pass import supports
from dllm_engine.next_edit.service import propose
from dllm_engine.protocol import HoleResult, InfillResult, ProtocolError, RequestCancelled, ScoreResult, TokenScore
from dllm_engine.tokenizer import TextTokenizer

DOC = "def area(width, height):\n    return w * height + w\n\n\ndef main():\n    print(area(2, 3))\n"
AT = DOC.index("width")


def rename_request(**kw) -> NextEditRequest:
    return NextEditRequest(document=DOC, edits=[RecentEdit(offset=AT, removed="w", inserted="width")],
                           region_start_line=0, region_end_line=6, cursor=AT + 5, **kw)


@pytest.fixture(scope="module")
def engine():
    e = Engine(EngineConfig(threads=1))  # the small model (tests/conftest.py)
    yield e
    e.shutdown()


def check_consistent(result: NextEditResult, doc: str = DOC) -> None:
    """The region text is the document's region with exactly the reported spans replaced."""
    region = "".join(doc.splitlines(keepends=True)[result.region_start_line:result.region_end_line])
    base = sum(len(line) for line in doc.splitlines(keepends=True)[:result.region_start_line])
    out, last = [], base
    for span in result.spans:
        assert doc[span.start:span.end] == span.original != span.new
        assert 0.0 <= span.confidence <= 1.0
        out += [doc[last:span.start], span.new]
        last = span.end
    out.append(doc[last:base + len(region)])
    assert result.region_text == "".join(out)


def test_real_model_re_masks_the_stale_uses(engine):
    # The small model's canvas is bidirectional: its spans are holes, not one left-to-right
    # stream (that is the default model's path: tests/bases/test_next_edit_stream.py).
    assert not supports(engine)
    result = engine.next_edit(rename_request())
    assert result.model == "small" and result.masked_spans >= 2  # both stale `w`
    check_consistent(result)
    assert all(s.source in ("edit", "score") for s in result.spans)


def test_real_model_proposes_a_stale_use_only_as_the_new_name(engine):
    # The small model writes noise: whatever it fills, a stale use comes back as `width` (at the
    # model's own score of it) or not at all, and a parsed caller's empty use list seeds nothing.
    result = engine.next_edit(rename_request(score_tokens=0))
    assert result.masked_spans == 2 and [s.new for s in result.spans] == ["width", "width"]
    assert all(0.0 < s.confidence < 1.0 for s in result.spans)
    check_consistent(result)
    none = engine.next_edit(rename_request(score_tokens=0, spans_are_uses=True))
    assert none.masked_spans == 0 and none.spans == []


def test_real_model_whole_region_baseline(engine):
    result = engine.next_edit(rename_request(mode="whole_region", params={"max_passes": 4}))
    assert result.masked_spans == 1 and result.scored_tokens == 0  # the lines after the edited one
    check_consistent(result)


def test_no_edit_and_no_suspicious_token_is_no_change(engine):
    req = NextEditRequest(document=DOC, edits=[], region_start_line=0, region_end_line=6, cursor=0,
                          suspicious_below=0.0)
    result = engine.next_edit(req)
    assert result.spans == [] and result.masked_spans == 0 and not result.changed
    assert result.region_text == DOC


def test_caller_spans_are_re_masked(engine):
    s = DOC.index("main")
    req = NextEditRequest(document=DOC, edits=[], region_start_line=0, region_end_line=6, cursor=0,
                          spans=[{"start": s + 1, "end": s + 2}], suspicious_below=0.0)
    result = engine.next_edit(req)
    assert result.masked_spans == 1
    check_consistent(result)
    assert all(sp.start == s and sp.end == s + 4 for sp in result.spans)  # widened to the word


@pytest.mark.parametrize("change,message", [
    (dict(edits=[RecentEdit(offset=3, removed="w", inserted="width")]), "newest edit"),
    (dict(region_start_line=4, region_end_line=2), "region lines"),
    (dict(region_end_line=99), "region lines"),
    (dict(cursor=10_000), "cursor"),
    (dict(spans=[{"start": 5, "end": 5}]), "span"),
    (dict(mode="everything"), "mode"),
    (dict(max_spans=0), "max_spans"),
    (dict(params={"threshold": 0}), "threshold"),
])
def test_bad_requests_say_what_is_wrong(engine, change, message):
    fields = dict(document=DOC, edits=[RecentEdit(offset=AT, removed="w", inserted="width")],
                  region_start_line=0, region_end_line=6, cursor=0)
    fields.update(change)
    with pytest.raises(ProtocolError, match=message):
        engine.next_edit(NextEditRequest(**fields))


async def test_in_process_client(engine):
    client = InProcessClient()
    client._engine = engine  # the module's engine, not a second copy of the model
    result = await client.next_edit(rename_request())
    check_consistent(result)


def test_daemon_app_serves_next_edit_and_refuses_bad_bodies(engine):
    host = EngineHost(lambda: engine)
    host.engine = engine
    http = TestClient(build_app(host), raise_server_exceptions=False)
    body = rename_request().to_dict()
    r = http.post("/v1/next_edit", json=body)
    assert r.status_code == 200, r.text
    check_consistent(NextEditResult.from_dict(r.json()))
    for field, value in [("cursor", True), ("cursor", 1.0), ("edits", [{"offset": "3"}]), ("colour", 1),
                         ("region_end_line", 0)]:
        r = http.post("/v1/next_edit", json={**body, field: value})
        assert r.status_code == 400 and field in r.json()["error"]["message"], r.text
    r = http.post("/v1/next_edit", json={**body, "cursor": 10_000})
    assert r.status_code == 400 and "cursor" in r.json()["error"]["message"]


class ScriptedEngine:
    """Scores every token at a fixed probability and fills every hole from a script."""

    model_name = "scripted"

    def __init__(self, fills: list[str], prob: float = 0.9) -> None:
        self.tokenizer = TextTokenizer(SMALL_MODEL_DIR / "tokenizer.json")
        self.fills, self.prob = fills, prob
        self.submitted = []
        self.cancelled = threading.Event()
        self.future: Future = Future()

    def score(self, request):
        _, offsets = self.tokenizer.encode_with_offsets(request.span)
        return ScoreResult(request.request_id, [TokenScore(s, e, request.span[s:e], self.prob, "x", 0.95)
                                                for s, e in offsets], self.model_name, 0.0)

    def submit(self, request):
        self.submitted.append(request)
        if self.fills is not None:
            self.future.set_result(InfillResult(request.request_id, [HoleResult(t, "end", 1, 1)
                                                                     for t in self.fills], self.model_name, 1.0))
        outer = self
        return type("Handle", (), {"result": lambda self, timeout=None: outer.future.result(timeout),
                                   "cancel": lambda self: outer.cancelled.set()})()


def test_spans_may_come_back_shorter_or_longer():
    doc = "def f(a, b, c):\n    return g(1, 2)\n\nx = f(1, 2)\ny = f(3, 4)\n"
    at = doc.index(", c")
    req = NextEditRequest(document=doc, edits=[RecentEdit(offset=at, removed="", inserted=", c")],
                          region_start_line=0, region_end_line=5, cursor=at + 3, score_tokens=0)
    # An argument list that gains an item is the model's; one that loses one (`3`) is no follow-up
    # of an added parameter: it is read as the edit suggests it (and scored: the threshold decides).
    result = propose(ScriptedEngine(["1, 2, 3", "3"]), req)
    assert [(s.original, s.new) for s in result.spans] == [("1, 2", "1, 2, 3"), ("3, 4", "3, 4, c")]
    assert result.region_text == "def f(a, b, c):\n    return g(1, 2)\n\nx = f(1, 2, 3)\ny = f(3, 4, c)\n"
    check_consistent(result, doc)
    # A span the caller names has no expectation: it may come back shorter.
    s = doc.index("1, 2)")
    req = NextEditRequest(document=doc, edits=[], region_start_line=0, region_end_line=5, cursor=s,
                          score_tokens=0, spans=[{"start": s, "end": s + 4}])
    result = propose(ScriptedEngine(["1"]), req)
    assert [(x.original, x.new) for x in result.spans] == [("1, 2", "1")]
    check_consistent(result, doc)


def test_a_stale_use_comes_back_as_the_new_name_or_not_at_all():
    # A fill that is another name, or the old name, is read as the new name, at its own score.
    result = propose(ScriptedEngine(["width * height", "w"]), rename_request(score_tokens=0))
    assert [(s.original, s.new) for s in result.spans] == [("w", "width"), ("w", "width")]
    assert result.masked_spans == 2
    result = propose(ScriptedEngine(["total", "cur_len"]), rename_request(score_tokens=0))
    assert [s.new for s in result.spans] == ["width", "width"]


def test_a_caller_that_parsed_the_code_and_named_no_use_gets_no_rename():
    engine = ScriptedEngine(["width", "width"])
    result = propose(engine, rename_request(score_tokens=0, spans_are_uses=True))
    assert result.spans == [] and result.masked_spans == 0 and engine.submitted == []
    use = DOC.index("+ w") + 2
    result = propose(ScriptedEngine(["width"]), rename_request(score_tokens=0, spans_are_uses=True,
                                                               spans=[{"start": use, "end": use + 1}]))
    assert [(s.start, s.new) for s in result.spans] == [(use, "width")]


def test_cancel_stops_a_request_waiting_on_the_engine():
    engine = ScriptedEngine(None)  # never answers
    cancel = threading.Event()
    timer = threading.Timer(0.2, cancel.set)
    timer.start()
    with pytest.raises(RequestCancelled):
        propose(engine, rename_request(score_tokens=0), cancel)
    assert engine.cancelled.is_set()  # the infill was cancelled in the engine too


def test_hole_contexts_and_stops():
    engine = ScriptedEngine(["width", "width"])
    propose(engine, rename_request(score_tokens=0))
    holes = engine.submitted[0].holes
    assert [h.prefix.endswith("return ") or h.prefix.endswith("height + ") for h in holes] == [True, True]
    assert all(h.stop == ("\n",) and h.max_tokens >= 8 for h in holes)


def test_each_stale_use_reads_the_others_with_the_new_name():
    """Stale uses must not vouch for the old name in each other's holes."""
    engine = ScriptedEngine(["width", "width"])
    propose(engine, rename_request(score_tokens=0))
    first, second = engine.submitted[0].holes
    assert first.suffix.startswith(" * height + width\n") and "return w *" not in second.prefix
    assert "return width * height + " in second.prefix
