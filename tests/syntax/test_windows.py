"""Prefix/suffix windows stay within budget and are cut at whole statements.

Checked against a brute-force list of every statement (named child of a
block node) in each sample file, at many cursors and budgets.
"""

from __future__ import annotations

import pytest

from dllm_lsp.syntax.context import ContextBudget, completion_context
from dllm_lsp.syntax.languages import language_named, parse
from dllm_lsp.syntax.windows import prefix_start, suffix_end

from .samples import SAMPLES, load


def _statements(text, spec):
    """(start, end) str offsets of every named child of a block node."""
    source = text.encode("utf-8")

    def idx(b):
        return len(source[:b].decode("utf-8"))

    out = []
    stack = [parse(text, spec).root_node]
    while stack:
        node = stack.pop()
        for child in node.children:
            if node.type in spec.block_types and child.is_named:
                out.append((idx(child.start_byte), idx(child.end_byte)))
            stack.append(child)
    return out


def _cursors(text):
    """The end of every third line and the middle of every seventh."""
    lines = text.split("\n")
    pos, out = 0, []
    for i, line in enumerate(lines):
        if i % 3 == 0:
            out.append(pos + len(line))
        if i % 7 == 0:
            out.append(pos + len(line) // 2)
        pos += len(line) + 1
    return out


@pytest.mark.parametrize("budget", [90, 250])
@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_prefix_window_starts_at_the_earliest_statement_in_budget(path, budget):
    text, spec = load(path)
    tree = parse(text, spec)
    starts = sorted({s for s, _ in _statements(text, spec)})
    for offset in _cursors(text):
        st = prefix_start(text, offset, budget, spec, tree)
        assert 0 <= st <= offset and offset - st <= budget
        step = budget // 4
        lower = -(-(offset - budget) // step) * step  # on the quarter-budget grid, never earlier
        if lower <= 0:
            assert st == 0
            continue
        in_budget = [s for s in starts if lower <= s < offset]
        if in_budget:
            first = len(text[st:]) - len(text[st:].lstrip())
            assert st + first == in_budget[0] or st == in_budget[0], (offset, text[st : st + 40])
        else:  # fallback: a whole line
            assert st == 0 or text[st - 1] == "\n" or st == lower


@pytest.mark.parametrize("budget", [90, 250])
@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_suffix_window_ends_at_the_last_statement_in_budget(path, budget):
    text, spec = load(path)
    tree = parse(text, spec)
    ends = sorted({e for _, e in _statements(text, spec)})
    for offset in _cursors(text):
        end = suffix_end(text, offset, budget, spec, tree)
        assert offset <= end <= len(text) and end - offset <= budget
        upper = offset + budget
        if upper >= len(text):
            assert end == len(text)
            continue
        in_budget = [e for e in ends if offset < e <= upper]
        if in_budget:
            stmt_end = len(text[:end].rstrip())
            assert stmt_end == in_budget[-1] or end == in_budget[-1], (offset, text[end - 40 : end])
        else:
            assert text[end : end + 1] in ("\n", "") or end == upper


def test_python_windows_golden():
    text, spec = load(next(p for p in SAMPLES if p.suffix == ".py"))
    offset = text.index("return min(candidates")
    ctx = completion_context(text, offset, spec, ContextBudget(prefix_tokens=60, suffix_tokens=20))
    assert ctx.kind == "none"  # before an identifier
    offset = text.index("        if not candidates:") + len("        if not candidates:\n            return None\n")
    ctx = completion_context(text, offset, spec, ContextBudget(prefix_tokens=60, suffix_tokens=30))
    # 192 characters back, rounded up to the quarter-budget grid (48 characters), lands inside
    # `candidates = [...]`: the window starts at the next statement.
    assert ctx.prefix.startswith("        if not candidates:\n")
    assert ctx.prefix.endswith("return None\n")
    # 96 characters forward: the rest of the method, not half of `def save`.
    assert ctx.suffix.rstrip().endswith("return min(candidates, key=lambda item: item.price)")


def test_typing_moves_the_prefix_window_once_a_quarter_budget():
    """While the user types at the end of the prefix, the window's start (the engine's context
    cache key after the suffix) moves once every quarter budget typed, not at each statement."""
    text, spec = load(next(p for p in SAMPLES if p.suffix == ".py"))
    budget, typed = 600, "x = compute(value, other)\n        "
    offset = text.index("        if not candidates:")
    text, offset = text[:offset] + "        \n" + text[offset:], offset + 8  # a new line in the block
    moves, last = 0, None
    for i in range(len(typed) * 8):
        ch = typed[i % len(typed)]
        text, offset = text[:offset] + ch + text[offset:], offset + 1
        st = prefix_start(text, offset, budget, spec, parse(text, spec))
        moves += last is not None and st != last
        last = st
    # 240 characters typed cross the 150-character grid once or twice; one more move and its
    # move back come while `compute(` is open (tree-sitter makes the enclosing class an ERROR
    # node until the paren closes). Without the grid the start moved 16 times here.
    assert moves <= 4


def test_budget_counts_tokens_times_chars_per_token():
    text, spec = load(next(p for p in SAMPLES if p.suffix == ".go"))
    offset = text.index("\treturn names")
    small = completion_context(text, offset, spec, ContextBudget(prefix_tokens=20, chars_per_token=3.0))
    large = completion_context(text, offset, spec, ContextBudget(prefix_tokens=200, chars_per_token=3.0))
    assert len(small.prefix) <= 60 < len(large.prefix) <= 600


def test_windows_without_a_language_cut_at_lines():
    text = "\n".join(f"line {i} = {i * i}" for i in range(100))
    offset = text.index("line 50")
    st = prefix_start(text, offset, 100)
    end = suffix_end(text, offset, 100)
    assert offset - st <= 100 and text[st - 1] == "\n"
    assert end - offset <= 100 and text[end] == "\n"
    assert language_named("cobol") is None
