"""The `emptyBody` setting: a suggestion at an empty block's body starts with code ("code", the
default: the engine never commits a comment or a docstring there) or with anything ("any").
Against the planner, and through a real server and the daemon's real HTTP app; the engine's
ban on real models is tested in tests/engine/test_start_ban.py and
tests/bases/test_stop_rules_default.py."""

from __future__ import annotations

from lsprotocol import types

from dllm_lsp.server.documents import DocumentStore
from dllm_lsp.server.infill import plan_completion, plan_range
from dllm_lsp.server.options import parse_options
from dllm_lsp.syntax.languages import language_named

from .conftest import command, inline, open_doc, start, wait_for
from .scripted_engine import ScriptedDaemon

PROSE = language_named("python").prose_starts
EMPTY_BODY = "def f(xs):\n    █\n\n\ndef g():\n    pass\n"
AFTER_OPENER = "def f(xs):█\n"
UNDER_IF = "def f(xs):\n    if xs:\n        █\n    return xs\n"
IN_CODE = "def f(xs):\n    total = █\n    return total\n"


def plan(text: str, settings: dict | None = None, uri: str = "file:///t.py", language_id: str = "python"):
    options, errors = parse_options(settings or {})
    assert not errors
    doc = DocumentStore().open(types.TextDocumentItem(uri=uri, language_id=language_id, version=1,
                                                      text=text.replace("█", "")))
    return plan_completion(doc, text.index("█"), options, {})


def test_an_empty_body_bans_comments_and_docstrings_by_default():
    assert '"' in PROSE and "'" in PROSE and "#" in PROSE and 'r"' in PROSE
    for text in (EMPTY_BODY, AFTER_OPENER, UNDER_IF):
        assert plan(text).hole.banned_starts == PROSE, text
    # ... also where the multiline policy makes it one line: the line still starts the body
    assert plan(EMPTY_BODY, {"multiline": "never"}).hole.banned_starts == PROSE


def test_elsewhere_and_under_any_nothing_is_banned():
    assert plan(IN_CODE).hole.banned_starts == ()
    assert plan("def f(xs):\n    total = 0\n    █\n    return total\n").hole.banned_starts == ()  # a blank line in code
    assert plan(EMPTY_BODY, {"emptyBody": "any"}).hole.banned_starts == ()
    js = "function f(xs) {\n  █\n}\n"  # no measured rule for other languages yet
    assert plan(js, uri="file:///t.js", language_id="javascript").hole.banned_starts == ()
    text = "def f(xs):\n    for x in xs:\n        print(x)\n"
    doc = DocumentStore().open(types.TextDocumentItem(uri="file:///r.py", language_id="python", version=1, text=text))
    options, _ = parse_options({})
    assert plan_range(doc, text.index("        print"), len(text) - 1, options)[1].banned_starts == ()  # the editor's span


def test_a_bad_value_keeps_the_default_and_says_why():
    for bad in ("docstrings", True, 1):
        options, errors = parse_options({"emptyBody": bad})
        assert options.empty_body == "code" and errors and "emptyBody" in errors[0], (bad, errors)


async def test_the_ban_goes_over_the_wire_and_follows_the_setting(client):
    """Real JSON-RPC and the daemon's real HTTP app: the interactive hole at an empty body
    carries the ban, and none once the setting says "any"."""
    with ScriptedDaemon() as daemon:
        daemon.engine.rules = [("    ", "return [x for x in xs]")]
        await start(client, engine={"mode": "remote", "url": daemon.url}, debounceMs=0)
        await wait_for(lambda: any(s["state"] == "ready" for s in client.statuses), 20, "engine ready")
        uri = "file:///tmp/empty_body.py"
        open_doc(client, uri, "def f(xs):\n    \n")
        seen = {}
        for policy in ("code", "any"):
            client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
                settings={"dllm": {"debounceMs": 0, "emptyBody": policy,
                                   "engine": {"mode": "remote", "url": daemon.url}}}))
            await command(client, "dllm.engineStatus")  # the settings are applied before the next request
            items = (await inline(client, uri, 1, 4)).items
            assert items and items[0].insert_text == "return [x for x in xs]"
            asked = [r for r in daemon.engine.infill_requests if r.priority == "interactive"]  # not a prefetch
            seen[policy] = asked[-1].holes[0].banned_starts
    assert seen == {"code": PROSE, "any": ()}
