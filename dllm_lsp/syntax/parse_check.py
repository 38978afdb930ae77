"""Did an edit introduce syntax errors? Shared by shaping, range edits and the refactor command."""

from __future__ import annotations

import re
import warnings
from functools import lru_cache

import tree_sitter

from dllm_lsp.syntax.document_tree import byte_offset, point_at
from dllm_lsp.syntax.languages import LanguageSpec, parse


def error_spans(tree: tree_sitter.Tree) -> list[tuple[int, int]]:
    """(start_byte, end_byte) of every ERROR and MISSING node of ``tree``."""
    root = tree.root_node
    if not root.has_error:
        return []
    spans = []
    cursor = root.walk()
    while True:
        node = cursor.node
        if node.is_error or node.is_missing:
            spans.append((node.start_byte, node.end_byte))
        # Only descend into subtrees that contain an error somewhere.
        if node.has_error and cursor.goto_first_child():
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return spans


def error_count(tree: tree_sitter.Tree) -> int:
    """Number of ERROR and MISSING nodes in ``tree``."""
    return len(error_spans(tree))


@lru_cache(maxsize=16)
def _fresh_error_count(text: str, language: LanguageSpec) -> int:
    # Cached: shaping tries several candidates against the same original.
    return error_count(parse(text, language))


def _compile_error(text: str) -> SyntaxError | None:
    """CPython's verdict on ``text`` as a module (compiled, never run)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarning for odd escapes: not an error
        try:
            compile(text, "<dllm-lsp>", "exec", dont_inherit=True)
        except SyntaxError as exc:
            return exc
        except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
            return SyntaxError(str(exc))
    return None


def python_compiles(text: str) -> bool:
    """Whether CPython accepts ``text`` as a module.

    tree-sitter-python is lenient where CPython is not: an unexpected indent inside a
    block, for one, parses without an ERROR node but is an IndentationError."""
    return _compile_error(text) is None


_OPEN_BLOCK = re.compile(r"expected an indented block after .* on line (\d+)")


def _open_block_at_the_end(err: SyntaxError, text: str) -> bool:
    """The only error is a block header on the last non-blank line with no body yet
    (`if x:` typed or suggested last): incomplete, not wrong, while typing."""
    m = _OPEN_BLOCK.match(err.msg or "")
    if m is None:
        return False
    lines = text.rstrip().split("\n")
    return int(m.group(1)) == len(lines)


def python_rejects_while_typing(text: str) -> bool:
    """CPython rejects ``text`` for more than a block header left open on its last line."""
    err = _compile_error(text)
    return err is not None and not _open_block_at_the_end(err, text)


@lru_cache(maxsize=16)
def _original_compiles(text: str) -> bool:
    return python_compiles(text)


def _compiler_rejects(original: str, filled: str, language: LanguageSpec) -> bool:
    """Python only: the original compiles and the filled text does not. A document that
    does not compile already (being typed, or newer syntax than this interpreter's) is
    left to tree-sitter."""
    return language.name == "python" and _original_compiles(original) and not python_compiles(filled)


def statements_around(text: str, tree: tree_sitter.Tree, lo: int, hi: int) -> str:
    """The whole lines of the top-level statements of ``text`` that overlap str offsets
    [lo, hi], and of the one after (a fill that dedents can break the next statement).
    Top-level Python statements compile on their own, so this is what an edit can break.
    Walks siblings from the first child at ``lo``: a keystroke never lists a big module."""
    data = text.encode("utf-8", "surrogatepass")
    blo, bhi = byte_offset(text, lo), byte_offset(text, hi)
    start, end = blo, bhi
    # A cursor, not Node.first_child_for_byte: with no child at or after the byte, that
    # one hands back a null node that crashes the process (py-tree-sitter 0.26).
    root = tree.root_node
    cursor = root.walk()
    node = cursor.node if cursor.goto_first_child_for_byte(blo) is not None else None
    if node is None or node.start_byte > blo:
        # The edit sits between statements (an indented blank line after a function is
        # still that function's body): start from the statement before it.
        before = node.prev_sibling if node is not None else (root.child(root.child_count - 1) if root.child_count else None)
        node = before or node
    if node is not None:
        start = min(start, node.start_byte)
        while node is not None:
            end = max(end, node.end_byte)
            if node.start_byte > bhi:  # the statement after the edit
                break
            node = node.next_sibling
    start = data.rfind(b"\n", 0, start) + 1
    newline = data.find(b"\n", end)
    end = len(data) if newline < 0 else newline
    return data[start:end].decode("utf-8", "surrogatepass") + "\n"


def _compiler_rejects_span(original: str, filled: str, language: LanguageSpec,
                           original_tree: tree_sitter.Tree, filled_tree: tree_sitter.Tree, lo: int, hi: int) -> bool:
    """`_compiler_rejects` for a one-span edit (a keystroke's suggestion), compiling only
    the top-level statements around it (a keystroke in a 2,000-line module must not compile
    the module twice). A block header left open at the very end is allowed: the user is
    about to type its body. The whole-file check of a refactor allows no such thing."""
    if language.name != "python":
        return False
    old_end = len(original) - (len(filled) - hi)
    before = statements_around(original, original_tree, lo, old_end)
    if not python_compiles(before):
        return False
    return python_rejects_while_typing(statements_around(filled, filled_tree, lo, hi))


def parse_spliced(
    original: str, filled: str, language: LanguageSpec, original_tree: tree_sitter.Tree | None, lo: int, hi: int
) -> tree_sitter.Tree:
    """Parse ``filled``, reusing ``original_tree`` when ``filled`` is ``original`` with one span replaced."""
    old_end = len(original) - (len(filled) - hi)
    if original_tree is None or old_end < lo or original[:lo] != filled[:lo] or original[old_end:] != filled[hi:]:
        return parse(filled, language)
    tree = original_tree.copy()
    start_byte = byte_offset(original, lo)
    tree.edit(
        start_byte=start_byte,
        old_end_byte=start_byte + len(original[lo:old_end].encode("utf-8", "surrogatepass")),
        new_end_byte=start_byte + len(filled[lo:hi].encode("utf-8", "surrogatepass")),
        start_point=point_at(original, lo),
        old_end_point=point_at(original, old_end),
        new_end_point=point_at(filled, hi),
    )
    return parse(filled, language, tree)


def new_error_count(
    original: str,
    filled: str,
    language: LanguageSpec | None,
    original_tree: tree_sitter.Tree | None = None,
    inserted: tuple[int, int] | None = None,
) -> int:
    """How many syntax errors ``filled`` adds to ``original`` (never negative).

    Errors are ERROR/MISSING nodes. Without ``inserted`` this is the growth of
    their count. With ``inserted`` (the str span of ``filled`` that the edit
    wrote, the rest being unchanged) the check is stricter, because a
    document being typed is already broken at the cursor (`x = ` is one
    error, `x = a +* b` is one too):

    - the baseline is the better of the original and the document with a
      single identifier in place of the insertion (the smallest plausible fill);
    - an error lying wholly inside the inserted text always counts.

    For Python, an edit that leaves a compiling module not compiling counts as one error
    even where tree-sitter sees none (indentation).

    ``original_tree`` (matching ``original``) makes the parse incremental.
    Unknown languages cannot be checked and report 0.
    """
    if language is None:
        return 0
    before = error_count(original_tree) if original_tree is not None else _fresh_error_count(original, language)
    if inserted is None:
        added = max(0, error_count(parse(filled, language)) - before)
        return added or int(_compiler_rejects(original, filled, language))
    lo, hi = inserted
    after_tree = parse_spliced(original, filled, language, original_tree, lo, hi)
    after_spans = error_spans(after_tree)

    def compiler_rejects() -> int:
        tree = original_tree if original_tree is not None else parse(original, language)
        return int(_compiler_rejects_span(original, filled, language, tree, after_tree, lo, hi))

    if not after_spans:
        return compiler_rejects()
    if len(after_spans) <= before:  # only now can the neutral baseline matter
        neutral = filled[:lo] + "x" + filled[hi:]
        before = min(before, error_count(parse_spliced(original, neutral, language, original_tree, lo, lo + 1)))
    added = max(0, len(after_spans) - before)
    if lo < hi:
        blo, bhi = byte_offset(filled, lo), byte_offset(filled, hi)
        inside = sum(1 for s, e in after_spans if blo <= s and e <= bhi and s < bhi)
        added = max(added, inside)
    return added or compiler_rejects()
