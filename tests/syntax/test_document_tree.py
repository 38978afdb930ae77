"""The incrementally updated tree equals a fresh parse after random edits (seeded).

tree-sitter's error recovery may legitimately pick a different (equally valid)
recovery when it reuses an old tree, so a document state with syntax errors
is only checked for coverage and error presence; every error-free state must
match a fresh parse node for node, and undoing every edit must give back the
original tree exactly (the invariant tree-sitter's own randomized tests use;
see tree-sitter/tree-sitter#1645, tree-sitter-haskell#129).
"""

from __future__ import annotations

import random
import re

import pytest

from dllm_lsp.syntax.document_tree import DocumentTree, byte_offset, point_at
from dllm_lsp.syntax.languages import parse

from .samples import SAMPLES, load

# Pieces that stress the tree: brackets, quotes, comment starts, newlines, multi-byte text.
PIECES = ["(", ")", "{", "}", "[", "]", '"', "'", "`", "/*", "*/", "#", "//", "\n", "\n    ", ":", ";", "é", "→", "😀", " x "]
IDENT = re.compile(r"\b[A-Za-z_]\w*\b")


def _shape(tree) -> list[tuple]:
    """Every node in document order with its type and exact position."""
    out = []
    cursor = tree.root_node.walk()
    visited_children = False
    while True:
        if not visited_children:
            n = cursor.node
            out.append((n.type, n.start_byte, n.end_byte, tuple(n.start_point), tuple(n.end_point), n.is_missing))
            if cursor.goto_first_child():
                continue
        if cursor.goto_next_sibling():
            visited_children = False
        elif cursor.goto_parent():
            visited_children = True
        else:
            return out


def _random_edit(rng: random.Random, text: str) -> tuple[int, int, str]:
    """(start, end, inserted): a mix of breaking edits and edits that keep code valid."""
    choice = rng.random()
    if choice < 0.3:  # rename an identifier: usually keeps the document valid
        m = rng.choice(list(IDENT.finditer(text)))
        return m.start(), m.end(), rng.choice(["value", "x2", "émoji_name", m.group(0) + "_1"])
    if choice < 0.45:  # duplicate a whole line
        lines = text.split("\n")
        i = rng.randrange(len(lines))
        start = sum(len(ln) + 1 for ln in lines[:i])
        return start, start, lines[i] + "\n"
    start = rng.randrange(len(text) + 1)
    end = min(len(text), start + rng.choice([0, 0, 1, 3, 12, 40]))
    if choice < 0.7:
        return start, end, rng.choice(PIECES)
    if choice < 0.9:  # move real code around: plausible half-typed states
        a = rng.randrange(len(text))
        return start, end, text[a : a + rng.randrange(1, 30)]
    return start, end, ""


def _check(doc, spec, where: str) -> bool:
    """Compare with a fresh parse; True if the state was error-free."""
    fresh = parse(doc.text, spec)
    assert doc.tree.root_node.end_byte == len(doc.text.encode("utf-8")), where
    assert doc.tree.root_node.has_error == fresh.root_node.has_error, where
    if not fresh.root_node.has_error:
        assert _shape(doc.tree) == _shape(fresh), where
        return True
    return False


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_incremental_equals_fresh_after_random_edits_and_undo(path):
    """Episodes of a few random edits, each undone in reverse, on one long-lived tree."""
    text, spec = load(path)
    original_shape = _shape(parse(text, spec))
    rng = random.Random(f"{path.name}-1234")
    doc = DocumentTree(text, spec)
    clean_states = 0
    for episode in range(25):
        undo: list[tuple[int, int, str]] = []
        for step in range(rng.randint(1, 4)):
            start, end, inserted = _random_edit(rng, doc.text)
            expected_text = doc.text[:start] + inserted + doc.text[end:]
            undo.append((start, start + len(inserted), doc.text[start:end]))
            doc.replace(start, end, inserted)
            assert doc.text == expected_text
            clean_states += _check(doc, spec, f"episode {episode} step {step}: {start}..{end} -> {inserted!r}")
        for start, end, old in reversed(undo):
            doc.replace(start, end, old)
            clean_states += _check(doc, spec, f"episode {episode} undo {start}..{end}")
        assert doc.text == text
        assert _shape(doc.tree) == original_shape
    assert clean_states >= 30  # the node-for-node comparison really ran on many states


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_update_from_full_text_equals_fresh(path):
    """The server path: only the new full text is known, the edit is inferred."""
    text, spec = load(path)
    rng = random.Random(7)
    doc = DocumentTree(text, spec)
    versions = [text]
    for step in range(25):
        start, end, inserted = _random_edit(rng, versions[-1])
        versions.append(versions[-1][:start] + inserted + versions[-1][end:])
        doc.update(versions[-1])
        assert doc.text == versions[-1]
        _check(doc, spec, f"step {step}")
    for version in reversed(versions[:-1]):
        doc.update(version)
        _check(doc, spec, "undo")
    assert _shape(doc.tree) == _shape(parse(text, spec))


def test_apply_edit_with_explicit_positions_on_multibyte_line():
    text, spec = load(SAMPLES[0])
    text = "s = 'héllo→'\n" + text
    doc = DocumentTree(text, spec)
    start = text.index("→") + 1  # after a 3-byte character
    new_text = text[:start] + "😀 x" + text[start:]
    assert point_at(text, start) == (0, len("s = 'héllo→".encode()))
    doc.apply_edit(
        start_byte=byte_offset(text, start),
        old_end_byte=byte_offset(text, start),
        new_end_byte=byte_offset(text, start) + len("😀 x".encode()),
        start_point=point_at(text, start),
        old_end_point=point_at(text, start),
        new_end_point=point_at(new_text, start + 3),
        new_text=new_text,
    )
    assert _shape(doc.tree) == _shape(parse(new_text, spec))


def test_update_with_no_change_keeps_the_tree():
    text, spec = load(SAMPLES[0])
    doc = DocumentTree(text, spec)
    tree = doc.tree
    doc.update(text)
    assert doc.tree is tree


def test_unknown_language_keeps_text_without_tree():
    doc = DocumentTree("a b c", None)
    doc.replace(2, 3, "xyz")
    assert doc.text == "a xyz c" and doc.tree is None
    doc.update("a b")
    assert doc.text == "a b"
