"""The `multiline` setting: where ghost text may span lines. By default ("emptyBlock") only in a
new block with no body yet, as Copilot and Cody decide; a blank line inside code that goes on
gets the next statement (one line, the engine stops at its newline). Range edits keep their
own kind. Against the planner, and through a real server with the small model."""

from __future__ import annotations

import pytest
from lsprotocol import types

from dllm_lsp.server.documents import DocumentStore
from dllm_lsp.server.infill import plan_completion, plan_range
from dllm_lsp.server.options import ServerOptions, parse_options

from .conftest import command, inline, open_doc, start, wait_for
from .scripted_engine import ScriptedDaemon

MID_BODY = "def f(xs):\n    total = 0\n    █\n    return total\n"  # a blank line inside a body
START_OF_BODY = "def f(x):\n█\n    return x\n"  # a block that already has a body below
EMPTY_BLOCK = "def f(xs):\n    █\n\n\ndef g():\n    pass\n"  # a new block, nothing in it yet


def plan(text: str, multiline: str | None = None, uri: str = "file:///t.py", language_id: str = "python"):
    options, errors = parse_options({"multiline": multiline} if multiline else {})
    assert not errors
    doc = DocumentStore().open(types.TextDocumentItem(uri=uri, language_id=language_id, version=1,
                                                      text=text.replace("█", "")))
    return plan_completion(doc, text.index("█"), options, {})


@pytest.mark.parametrize("text", [MID_BODY, START_OF_BODY])
def test_a_blank_line_in_code_gets_one_line_by_default(text):
    p = plan(text)
    assert p.ctx.kind == "line" and p.hole.stop == ("\n",) and p.hole.stop_indent is None
    assert p.hole.max_tokens == 24 and p.hole.bucket == 16
    assert p.ctx.reason in ("blank line", "start of block")  # the place is still named for what it is


def test_always_keeps_the_multi_line_fill_with_its_block_stop():
    p = plan(MID_BODY, "always")
    assert p.ctx.kind == "multiline" and p.hole.stop == () and p.hole.max_tokens == 64 and p.hole.stop_indent == 4


def test_an_empty_block_stays_multi_line_unless_never():
    p = plan(EMPTY_BLOCK)
    assert p.ctx.kind == "block" and p.hole.max_tokens == 128 and p.hole.stop_indent == 4
    never = plan(EMPTY_BLOCK, "never")
    assert never.ctx.kind == "line" and never.hole.stop == ("\n",)


def test_a_multi_line_suggestion_shows_at_most_multiline_max_lines():
    """The cap goes to the shaping (ctx.max_lines) and to the engine (Hole.max_lines, which ends
    the fill there); a single line has no cap to carry, nor does a range edit."""
    assert plan(EMPTY_BLOCK).hole.max_lines == 4 and plan(EMPTY_BLOCK).ctx.max_lines == 4
    assert plan(MID_BODY, "always").hole.max_lines == 4
    assert plan(MID_BODY).hole.max_lines is None  # one line
    options, errors = parse_options({"multilineMaxLines": 9})
    assert not errors and options.multiline_max_lines == 9
    doc = DocumentStore().open(types.TextDocumentItem(uri="file:///c.py", language_id="python", version=1,
                                                      text=EMPTY_BLOCK.replace("█", "")))
    assert plan_completion(doc, EMPTY_BLOCK.index("█"), options, {}).hole.max_lines == 9
    text = "def f(xs):\n    for x in xs:\n        print(x)\n        print(x * 2)\n"
    doc = DocumentStore().open(types.TextDocumentItem(uri="file:///r.py", language_id="python", version=1, text=text))
    assert plan_range(doc, text.index("    for"), len(text) - 1, options)[1].max_lines is None
    for bad in (0, 201, 2.5, "4", True):
        options, errors = parse_options({"multilineMaxLines": bad})
        assert options.multiline_max_lines == 4 and errors and "multilineMaxLines" in errors[0], (bad, errors)


def test_braces_languages_follow_the_same_policy():
    js = "function f(xs) {\n  let t = 0;\n  █\n  return t;\n}\n"
    assert plan(js, uri="file:///t.js", language_id="javascript").ctx.kind == "line"
    assert plan(js, "always", uri="file:///t.js", language_id="javascript").ctx.kind == "multiline"


def test_a_range_edit_is_not_narrowed():
    text = "def f(xs):\n    for x in xs:\n        print(x)\n        print(x * 2)\n"
    doc = DocumentStore().open(types.TextDocumentItem(uri="file:///r.py", language_id="python", version=1, text=text))
    # The editor chose the span, so the policy (which only narrows ghost text) leaves it whole.
    ctx, hole = plan_range(doc, text.index("        print(x)"), len(text) - 1, ServerOptions(multiline="never"))
    assert ctx.kind == "block" and hole.stop == () and ctx.max_tokens > 24


def test_a_bad_value_keeps_the_default_and_says_why():
    options, errors = parse_options({"multiline": "sometimes"})
    assert options.multiline == "emptyBlock"
    assert errors and "'multiline' must be one of emptyBlock, always, never" in errors[0]


@pytest.mark.slow
async def test_the_real_server_asks_one_line_then_many_after_the_setting_changes(client):
    """The small model behind a real server: the engine's answer for a blank line mid-body is a
    line fill, a multi-line fill once `multiline` is "always"; a suggestion shown is one line."""
    await client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(), initialization_options={"debounceMs": 0}))
    await wait_for(lambda: client.statuses and client.statuses[-1]["state"] in ("ready", "error"),
                   timeout=60, what="the model to load")
    assert client.statuses[-1]["state"] == "ready", client.statuses[-1]
    uri = "file:///tmp/policy.py"
    open_doc(client, uri, MID_BODY.replace("█", ""))
    items = (await inline(client, uri, 2, 4)).items
    stats = await command(client, "dllm.serverStats")
    assert [a["kind"] for a in stats["engineAnswerMs"]] == ["line"] and stats["lastResult"]["model"] == "small"
    assert all("\n" not in item.insert_text for item in items)

    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dllm": {"debounceMs": 0, "multiline": "always"}}))
    await command(client, "dllm.engineStatus")  # the settings are applied before the next request
    await inline(client, uri, 2, 4)
    stats = await command(client, "dllm.serverStats")
    assert [a["kind"] for a in stats["engineAnswerMs"]] == ["line", "multiline"]
    # Each answer carries the engine's breakdown, so a slow one says why (benchmarks/bench_lsp.py).
    first, second = stats["engineAnswerMs"]
    assert first["passes"] >= 1 and first["contextTokens"] > 0 and first["engineMs"] <= first["ms"]
    assert second["cachedTokens"] > 0  # the same place again: its context came from the cache



async def test_the_server_shows_at_most_the_lines_asked_for(client):
    """Over real JSON-RPC and the daemon's real HTTP app with a scripted model that writes six
    lines for an empty body: the hole carries the cap over the wire and the ghost text holds that
    many lines (an open bracket runs on to its close; a docstring cut inside is closed); the engine's own stop on a real model is
    tested in tests/engine/test_line_cap.py and tests/bases/test_stop_rules_default.py."""
    body = '"""Parse.\n\n    Long (prose.\n    """\n    args = []\n    for a in argv:\n        args.append(a)\n    return args'
    with ScriptedDaemon() as daemon:
        daemon.engine.rules = [("    ", body)]
        await start(client, engine={"mode": "remote", "url": daemon.url}, debounceMs=0)
        await wait_for(lambda: any(s["state"] == "ready" for s in client.statuses), 20, "engine ready")
        uri = "file:///tmp/capped.py"
        open_doc(client, uri, "def parse(argv):\n    \n")
        shown = {}
        for cap in (200, 4, 2, 1):
            client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
                settings={"dllm": {"debounceMs": 0, "multilineMaxLines": cap,
                                   "engine": {"mode": "remote", "url": daemon.url}}}))
            await command(client, "dllm.engineStatus")  # the settings are applied before the next request
            items = (await inline(client, uri, 1, 4)).items
            shown[cap] = items[0].insert_text if items else None
            asked = [r for r in daemon.engine.infill_requests if r.priority == "interactive"]  # not a prefetch
            assert asked[-1].holes[0].max_lines == cap
    assert shown[200] == body, shown
    assert shown[4] == '"""Parse.\n\n    Long (prose.\n    """\n    args = []', shown  # 3 lines of docstring, 1 of code
    assert shown[2] == '"""Parse.\n\n    Long (prose.\n    """', shown  # cut after its second line, closed (where it ended anyway)
    assert shown[1] == '"""Parse.\n    """', shown  # cut inside the docstring, and closed
