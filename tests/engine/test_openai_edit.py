"""Inception's /v1/edit/completions: apply-edit merges checked exactly where the alignment
decides them, the spots it cannot decide handed to the model (the small model through the
daemon for the plumbing; tests/bases/test_apply_edit_default.py for the default model's
answer), and the next-edit message read into document, region, cursor and history and
served by issue 14's engine request."""

from __future__ import annotations

import openai
import pytest
from starlette.testclient import TestClient

from dllm_engine.daemon import EngineHost, build_app
from dllm_engine.openai_api.apply_edit import Spot, apply_edit
from dllm_engine.openai_api.apply_edit_model import merge_with_model
from dllm_engine.openai_api.next_edit_format import parse_next_edit

CALC = "class Calculator:\n    def add(self, a, b):\n        return a + b\n"

APPLY_CASES = {
    "a method added (no marker, no shared line)": (
        CALC,
        "\n    def multiply(self, a, b):\n        return a * b\n",
        CALC + "\n    def multiply(self, a, b):\n        return a * b\n",
    ),
    "two bodies edited, the code between kept by a marker": (
        "import os\n\ndef f(x):\n    y = x + 1\n    return y\n\ndef g():\n    return 2\n\ndef h():\n    return 3\n",
        "# ... existing code ...\ndef f(x):\n    y = x + 2\n    return y\n# ... existing code ...\ndef h():\n    return 4\n",
        "import os\n\ndef f(x):\n    y = x + 2\n    return y\n\ndef g():\n    return 2\n\ndef h():\n    return 4\n",
    ),
    "a line inserted inside a function, JavaScript markers": (
        "function load(path) {\n  const data = read(path);\n  return parse(data);\n}\n\nexport { load };\n",
        "// ... existing code ...\n  const data = read(path);\n  log(`loaded ${path}`);\n  return parse(data);\n"
        "// ... existing code ...\n",
        "function load(path) {\n  const data = read(path);\n  log(`loaded ${path}`);\n  return parse(data);\n}\n\n"
        "export { load };\n",
    ),
    "contiguous parts with no marker between: the lines between them go": (
        "a = 1\nb = 2\nc = 3\nd = 4\n",
        "a = 1\nd = 4\n",
        "a = 1\nd = 4\n",
    ),
    "an import added at the top, the rest kept": (
        "import os\n\nprint(os.getcwd())\n",
        "import os\nimport sys\n// ... existing code ...\n",
        "import os\nimport sys\n\nprint(os.getcwd())\n",
    ),
}


def never(spot: Spot) -> int:
    raise AssertionError(f"the alignment decides this merge alone, yet asked about a {spot.kind}")


@pytest.mark.parametrize("name", list(APPLY_CASES))
def test_apply_edit_merges_exactly(name):
    original, snippet, merged = APPLY_CASES[name]
    assert apply_edit(original, snippet, decide=never) == merged


AREA = "def area(w, h):\n    check(w, h)\n    return w * h\n"
VALIDATE = "# ... existing code ...\n    validate(w, h)\n    return w * h\n"
EVENS = ("def evens(items):\n    result = [x for x in items if x % 2 == 0]\n    return result\n\n"
         "def doubled(items):\n    result = []\n    return result\n")
DOUBLE = "# ... existing code ...\n    result = [x * 2 for x in items]\n    return result\n# ... existing code ...\n"


def answering(*choices: int):
    asked: list[Spot] = []

    def decide(spot: Spot) -> int:
        asked.append(spot)
        return choices[len(asked) - 1]
    return decide, asked


def test_a_half_alike_line_after_a_marker_is_a_seam_with_both_merges_offered():
    """`validate(w, h)` after a marker, beside `check(w, h)` (ratio 0.67): an edit of it, or a line
    inserted after it? The alignment cannot say; each answer gives its own exact merge."""
    decide, asked = answering(0)
    assert apply_edit(AREA, VALIDATE, decide) == "def area(w, h):\n    check(w, h)\n    validate(w, h)\n    return w * h\n"
    (spot,) = asked
    assert spot.kind == "seam" and spot.line == 1
    assert [o.text for o in spot.options] == ["    check(w, h)\n    validate(w, h)\n", "    validate(w, h)\n"]
    assert spot.options[0].prefix == "def area(w, h):\n" and spot.options[0].suffix == "    return w * h\n"
    decide, _ = answering(1)
    assert apply_edit(AREA, VALIDATE, decide) == "def area(w, h):\n    validate(w, h)\n    return w * h\n"


def test_a_half_alike_line_before_a_marker_is_a_seam_too():
    original = "x = 1\ny = 2\nlog(x)\nz = 3\n"
    snippet = "y = 2\nprint(x)\n# ... existing code ...\n"  # `print(x)` beside `log(x)`: ratio 0.57
    decide, asked = answering(0)
    assert apply_edit(original, snippet, decide) == "x = 1\ny = 2\nprint(x)\nlog(x)\nz = 3\n"
    assert [(o.prefix, o.text, o.suffix) for o in asked[0].options] == [
        ("x = 1\ny = 2\n", "print(x)\nlog(x)\n", "z = 3\n"), ("x = 1\ny = 2\n", "print(x)\n", "z = 3\n")]
    decide, _ = answering(1)
    assert apply_edit(original, snippet, decide) == "x = 1\ny = 2\nprint(x)\nz = 3\n"


def test_an_anchor_found_twice_offers_each_placement_with_its_own_context():
    decide, asked = answering(0)
    first = apply_edit(EVENS, DOUBLE, decide)
    assert first.startswith("def evens(items):\n    result = [x * 2 for x in items]\n    return result\n\n")
    (spot,) = asked  # the first placement's line is alike enough (0.78): an edit, no seam
    assert spot.kind == "anchor" and len(spot.options) == 2
    # each hole covers what the stretch may replace there: at `doubled`, its half alike `result = []` too
    assert spot.options[0].prefix == "def evens(items):\n" and spot.options[1].prefix.endswith("def doubled(items):\n")
    assert spot.options[1].suffix == "" and spot.options[0].text == spot.options[1].text
    # The second placement, then its half alike line (`result = []`) replaced: the merge the snippet meant.
    decide, asked = answering(1, 1)
    assert apply_edit(EVENS, DOUBLE, decide) == EVENS.replace("    result = []", "    result = [x * 2 for x in items]")
    assert [s.kind for s in asked] == ["anchor", "seam"]


def test_past_eight_spots_the_alignment_guess_stands(default_engine):
    """Nine stretches, each anchored on a `return result` that 40 functions end with: every one
    is ambiguous (a placement is at most 4 functions on), and only the first eight are asked."""
    original = "".join(f"def f{i}(items):\n    result = []\n    return result\n\n" for i in range(40))
    snippet = "# ... existing code ...\n    result = [1]\n    return result\n" * 9 + "# ... existing code ...\n"
    text, decisions = merge_with_model(default_engine, original, snippet)
    assert len(decisions) == 8 and text.count("result = [1]") == 9


@pytest.fixture(scope="module")
def small_client(default_engine):
    host = EngineHost(lambda: default_engine)
    host.engine = default_engine
    http = TestClient(build_app(host, "t"), raise_server_exceptions=False)
    return openai.OpenAI(base_url="http://testserver/v1", api_key="t", http_client=http, max_retries=0)


def apply_message(original: str, snippet: str) -> str:
    return f"<|original_code|>\n{original}<|/original_code|>\n<|update_snippet|>\n{snippet}<|/update_snippet|>"


def test_the_model_decides_the_open_spots_through_the_daemon(small_client, default_engine):
    """The small model writes noise, but real noise: each spot's holes go through the engine,
    its fills come back in `dllm_lsp.decisions`, and the answer is one of the alignment's merges."""
    r = small_client.post("/apply/completions", cast_to=object,
                          body={"model": "mercury-edit-2", "messages": [{"role": "user",
                                                                         "content": apply_message(EVENS, DOUBLE)}]})
    decisions = r["dllm_lsp"]["decisions"]
    assert decisions[0]["kind"] == "anchor" and decisions[0]["options"] == 2 and len(decisions[0]["fills"]) == 2
    assert all(isinstance(f, str) for d in decisions for f in d["fills"])
    merges = set()
    for choices in ((0,), (1, 0), (1, 1)):
        merges.add(apply_edit(EVENS, DOUBLE, answering(*choices)[0]).rstrip("\n"))
    assert r["choices"][0]["message"]["content"] in merges
    # The same decisions in process (greedy: the same fills), and real token counts.
    text, again = merge_with_model(default_engine, EVENS, DOUBLE)
    assert again == decisions and text.rstrip("\n") == r["choices"][0]["message"]["content"]
    assert r["usage"]["completion_tokens"] == len(default_engine.tokenizer.encode(r["choices"][0]["message"]["content"]))
    # An unambiguous merge asks nothing.
    original, snippet, merged = APPLY_CASES["two bodies edited, the code between kept by a marker"]
    r = small_client.post("/edit/completions", cast_to=object,
                          body={"messages": [{"role": "user", "content": apply_message(original, snippet)}]})
    assert r["dllm_lsp"]["decisions"] == [] and r["choices"][0]["message"]["content"] == merged.rstrip("\n")


def next_edit_message(lines: list[str], region: tuple[int, int], history: str) -> str:
    body = lines[:region[0]] + ["<|code_to_edit|>"] + lines[region[0]:region[1]] + ["<|/code_to_edit|>"] + lines[region[1]:]
    return ("<|recently_viewed_code_snippets|>\n<|recently_viewed_code_snippet|>\ncode_snippet_file_path: util.py\n"
            "def helper():\n    pass\n<|/recently_viewed_code_snippet|>\n<|/recently_viewed_code_snippets|>\n\n"
            "<|current_file_content|>\ncurrent_file_path: main.py\n" + "\n".join(body) +
            "\n<|/current_file_content|>\n\n<|edit_diff_history|>\n" + history + "\n<|/edit_diff_history|>")


def test_the_next_edit_message_is_read_into_document_region_cursor_history():
    lines = ["import os", "def area(w, h):", "    return w<|cursor|> * h", "", "print(area(2, 3))"]
    history = "--- main.py\n+++ main.py\n@@ -1,2 +1,2 @@\n-def area(x, y):\n+def area(w, h):\n" \
              "--- main.py\n+++ main.py\n@@ -3 +3 @@\n-print(area(1))\n+print(area(2, 3))"
    p = parse_next_edit(next_edit_message(lines, (1, 3), history))
    assert p.document == "import os\ndef area(w, h):\n    return w * h\n\nprint(area(2, 3))"
    assert p.editable == "def area(w, h):\n    return w * h"
    assert p.document[p.cursor:].startswith(" * h") and p.region[0] <= p.cursor <= p.region[1]
    assert p.path == "main.py" and p.snippets == [("util.py", "def helper():\n    pass")]
    assert len(p.history) == 2 and p.history[0].startswith("--- main.py") and "+def area(w, h):" in p.history[0]
    # A region at the very start of the file, no cursor: the cursor is the region's end.
    p = parse_next_edit(next_edit_message(["x = 1", "y = 2"], (0, 1), ""))
    assert (p.document, p.editable, p.cursor, p.history) == ("x = 1\ny = 2", "x = 1", 5, [])


def continue_reads(message: str) -> str:
    """Continue's Mercury next-edit provider's extractCompletion, as written in TypeScript
    (core/nextEdit/providers/MercuryCoderNextEditProvider.ts): a slice between the fences,
    with JavaScript's slice semantics for the -1 of a fence not found."""
    start, end = message.find("```\n") + len("```\n"), message.rfind("\n\n```")
    end = len(message) + end if end < 0 else end
    return message[start:end]


@pytest.mark.parametrize("region", ["", "x = 1", "def f():\n    return 2\n", "a\n\n"])
def test_the_fenced_region_reads_back_exactly_as_continue_reads_it(region):
    from dllm_engine.openai_api.edit import fenced

    assert continue_reads(fenced(region)) == region


SEEN: list = []


class NamedEngine:
    """A fake engine: a name, and a next edit that renames x, y to w, h on the region's second line."""
    model_name = "default"
    propose = True

    class tokenizer:  # usage counts; the real engine's are checked above
        encode = staticmethod(str.split)

    def next_edit(self, request, cancel=None):
        from dllm_engine.next_edit.request import EditSpan, NextEditResult

        SEEN.append(request)
        spans = []
        if self.propose:
            start = request.document.index("x * y")
            spans = [EditSpan(start=start, end=start + 5, original="x * y", new="w * h", confidence=0.9, source="name")]
        return NextEditResult(request_id=request.request_id, region_start_line=request.region_start_line,
                              region_end_line=request.region_end_line, region_text="", spans=spans, masked_spans=1,
                              scored_tokens=0, model="default", elapsed_ms=1.0)


@pytest.fixture
def client():
    host = EngineHost(lambda: NamedEngine())
    host.engine = NamedEngine()
    http = TestClient(build_app(host, "t"), raise_server_exceptions=False)
    return openai.OpenAI(base_url="http://testserver/v1", api_key="t", http_client=http, max_retries=0)


def test_the_edit_endpoint_applies_and_refuses_clearly(client):
    original, snippet, merged = APPLY_CASES["two bodies edited, the code between kept by a marker"]
    content = f"<|original_code|>\n{original}<|/original_code|>\n<|update_snippet|>\n{snippet}<|/update_snippet|>"
    r = client.post("/edit/completions", cast_to=object,
                    body={"model": "mercury-edit-2", "messages": [{"role": "user", "content": content}]})
    assert r["object"] == "chat.completion" and r["model"] == "mercury-edit-2"
    # The tags sit on lines of their own and take the line break before them, as in the next-edit format.
    assert r["choices"][0]["message"]["content"] == merged.rstrip("\n")
    # Continue's Inception provider posts apply-edit to /v1/apply/completions, streamed.
    chunks = list(client.post("/apply/completions", cast_to=object, stream=True,
                              stream_cls=openai.Stream[object],
                              body={"messages": [{"role": "user", "content": content}], "stream": True}))
    assert [c["choices"][0]["delta"]["content"] for c in chunks] == [merged.rstrip("\n")]
    with pytest.raises(openai.BadRequestError, match="neither edit format"):
        client.post("/edit/completions", cast_to=object, body={"messages": [{"role": "user", "content": "hi"}]})
    # A lone surrogate in a text part is refused at the boundary (it reached the tokenizer: a 500).
    # (sent as raw JSON: the SDK cannot encode one)
    raw = '{"messages": [{"role": "user", "content": [{"type": "text", "text": "<|original_code|>\\ud800"}]}]}'
    r = client._client.post("http://testserver/v1/apply/completions", content=raw,
                            headers={"Authorization": "Bearer t", "Content-Type": "application/json"})
    assert r.status_code == 400 and "surrogate" in r.json()["error"]["message"]
    with pytest.raises(openai.BadRequestError, match="only text content parts"):
        client.post("/apply/completions", cast_to=object,
                    body={"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})


def test_a_next_edit_message_is_served_by_the_engines_next_edit_request(client):
    """The message becomes the one NextEditRequest (issue 14's): the newest diff is the last
    edit, placed where its text stands; the answer is the region with the proposed spans applied."""
    lines = ["def area(w, h):", "    return x * y", "", "print(area(2, 3))"]
    history = "--- main.py\n+++ main.py\n@@ -1 +1 @@\n-def area(x, y):\n+def area(w, h):"
    r = client.post("/edit/completions", cast_to=object,
                    body={"model": "mercury-edit-2",
                          "messages": [{"role": "user", "content": next_edit_message(lines, (0, 2), history)}]})
    req = SEEN[-1]
    assert (req.region_start_line, req.region_end_line) == (0, 2)
    assert req.last_edit.removed == "def area(x, y):" and req.last_edit.inserted == "def area(w, h):"
    assert req.document[req.last_edit.offset:].startswith("def area(w, h):")
    assert continue_reads(r["choices"][0]["message"]["content"]) == "def area(w, h):\n    return w * h"
    # no change proposed: the region comes back as it is
    SEEN.clear()
    NamedEngine.propose = False
    try:
        r = client.post("/edit/completions", cast_to=object,
                        body={"messages": [{"role": "user", "content": next_edit_message(lines, (0, 2), "")}]})
    finally:
        NamedEngine.propose = True
    assert continue_reads(r["choices"][0]["message"]["content"]) == "def area(w, h):\n    return x * y"
    assert SEEN[-1].edits == []
