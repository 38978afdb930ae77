"""The editable region of a next-edit request: pure functions of text, tree and edit.

A window of lines around the last edit, grown to the enclosing syntax node (the
function, else the statement) while it fits in `max_lines`, then grown toward the
other uses of a name the edit renamed, nearest first, within the same cap. Without
a grammar (or a tree), lines only. One region, contiguous: it is what the engine
re-masks spans of and what a client shows as one proposal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ...syntax.document_tree import byte_offset

WINDOW_LINES = 3  # lines kept on each side of the edit before syntax grows the region
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Region:
    start_line: int
    end_line: int  # exclusive
    uses: tuple[tuple[int, int], ...] = ()  # other uses of renamed names inside the region (str offsets)
    # The inside of each one-line call's argument list of a function given a parameter, in the region.
    arguments: tuple[tuple[int, int], ...] = ()
    parsed: bool = False  # a tree named `uses` and `arguments`: what they leave out is not code


def _enclosing_rows(tree: Any, spec: Any, text: str, start: int, end: int, max_lines: int) -> tuple[int, int] | None:
    """Rows [first, last] of the largest node around [start, end) that fits in `max_lines`,
    stopping at the first definition (a function or class body is the natural unit)."""
    root = tree.root_node
    node = root.descendant_for_byte_range(byte_offset(text, start), byte_offset(text, max(start, end)))
    best = None
    while node is not None:
        if node.end_point.row - node.start_point.row + 1 > max_lines:
            break
        best = node
        if node.type in spec.definition_types:
            break
        node = node.parent
    return None if best is None else (best.start_point.row, best.end_point.row)


def _is_identifier_at(tree: Any, text: str, start: int, end: int) -> bool:
    """Whether [start, end) is an identifier node (not inside a string or a comment)."""
    if tree is None:
        return True
    b = byte_offset(text, start)
    node = tree.root_node.descendant_for_byte_range(b, b + len(text[start:end].encode("utf-8", "surrogatepass")))
    return node is not None and node.type.endswith("identifier")


# Where an identifier is bound (a parameter, an assignment's or a loop's target): a name bound in
# a function is that function's local. Python's node types; a grammar without them binds nothing
# here, and a rename there reaches the whole file (wider, never narrower, than its scope).
BINDING_PARENTS = frozenset({"parameters", "default_parameter", "typed_parameter", "typed_default_parameter",
                             "list_splat_pattern", "dictionary_splat_pattern", "pattern_list", "tuple_pattern",
                             "as_pattern_target", "lambda_parameters"})
BINDING_FIELDS = frozenset({"left", "name"})  # an assignment's or a loop's target; a nested def's name
NOT_BINDING = frozenset({"keyword_argument"})  # `f(name=...)` names a parameter of `f`, binds nothing here


def rename_scope(tree: Any, spec: Any, text: str, start: int, end: int,
                 words: set[str] = frozenset()) -> tuple[int, int]:
    """The str range a rename at [start, end) reaches: the innermost function around it that
    binds one of `words` (the old or the new name: a parameter or a local, renamed at its
    definition or at a use after it), else the whole text (a function renamed at its `def` or
    at one of its calls, a module-level name: its uses are anywhere)."""
    if tree is None or spec is None:
        return 0, len(text)
    b = byte_offset(text, start)
    node = tree.root_node.descendant_for_byte_range(b, byte_offset(text, max(start, end)))
    while node is not None:
        if node.type in spec.definition_types and "class" not in node.type:
            name = node.child_by_field_name("name")
            if name is not None and name.start_byte <= b <= name.end_byte:
                return 0, len(text)  # the definition's own name: it is used from outside
            if name is not None and _binds(node, {w.encode() for w in words}):
                return _str_offset(text, node.start_byte), _str_offset(text, node.end_byte)
        node = node.parent
    return 0, len(text)


def _binds(function: Any, words: set[bytes]) -> bool:
    """Whether `function` binds one of `words` (its own name is not its binding: a recursive
    call renamed is still a module-level function's)."""
    own = function.child_by_field_name("name")
    stack = [c for c in function.children if own is None or c.id != own.id]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type != "identifier" or node.text not in words or node.parent is None:
            continue
        parent = node.parent
        if parent.type in BINDING_PARENTS:
            return True
        field = next((parent.field_name_for_child(i) for i, c in enumerate(parent.children) if c.id == node.id), None)
        if field in BINDING_FIELDS and parent.type not in NOT_BINDING:
            return True
    return False


def _identifiers(text: str, tree: Any, word: str):
    """The identifier nodes spelling `word` (found by a text search, not a walk of the whole tree:
    a large file's tree has hundreds of thousands of nodes)."""
    for m in re.finditer(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])", text):
        b = byte_offset(text, m.start())
        node = tree.root_node.descendant_for_byte_range(b, b + len(word.encode("utf-8", "surrogatepass")))
        if node is not None and node.type.endswith("identifier"):
            yield node


def still_defined(text: str, tree: Any, spec: Any, words: set[str]) -> set[str]:
    """The `words` some definition in the tree (a `def`, a `class`) still has as its name."""
    if tree is None or spec is None:
        return set()
    found = set()
    for word in words:
        for node in _identifiers(text, tree, word):
            parent = node.parent
            name = parent.child_by_field_name("name") if parent is not None and parent.type in spec.definition_types \
                else None
            if name is not None and name.id == node.id:
                found.add(word)
                break
    return found


def _str_offset(text: str, byte: int) -> int:
    return len(text.encode("utf-8", "surrogatepass")[:byte].decode("utf-8", "ignore"))


def renamed_uses(text: str, tree: Any, words: set[str], exclude: tuple[int, int],
                 scope: tuple[int, int] | None = None) -> list[tuple[int, int]]:
    """Identifier occurrences of `words` within `scope` (the whole text by default), the edit's own text excluded."""
    lo, hi = scope or (0, len(text))
    uses = []
    for word in sorted(words):
        for m in re.compile(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])").finditer(text, lo, hi):
            if (m.end() <= exclude[0] or m.start() >= exclude[1]) and _is_identifier_at(tree, text, m.start(), m.end()):
                uses.append((m.start(), m.end()))
    return sorted(uses)


def call_arguments(text: str, tree: Any, names: set[str], exclude: tuple[int, int]) -> list[tuple[int, int]]:
    """The inside of the argument list of each one-line call of `names` in code (a docstring's
    example call is a string, not a call node), the edited call excluded."""
    if tree is None:
        return []
    out = []
    for name in names:
        for node in _identifiers(text, tree, name):
            call = node.parent
            if call is None or not (call.type == "call" or call.type.endswith("call_expression")):
                continue
            fn, args = call.child_by_field_name("function"), call.child_by_field_name("arguments")
            if fn is None or args is None or fn.id != node.id or args.start_point.row != args.end_point.row:
                continue
            a, b = _str_offset(text, args.start_byte) + 1, _str_offset(text, args.end_byte) - 1
            if b >= a and (b < exclude[0] or a > exclude[1]):
                out.append((a, b))
    return sorted(out)


def editable_region(text: str, tree: Any, spec: Any, edit_start: int, edit_end: int, max_lines: int,
                    renamed: set[str] = frozenset(), reach: set[str] = frozenset(),
                    written: set[str] = frozenset()) -> Region:
    """`renamed`: names the edit replaced (their uses grow the region and are spans to re-mask);
    `reach`: names whose uses only grow the region (the calls of a function given a parameter);
    `written`: the names the edit wrote (where the new name is bound tells a local's scope).

    When no use the edit left behind fits in the window around the edit (a function renamed at
    its `def`, its calls further than the cap), the region is the window around the nearest
    one instead: the next edit is there, and the client offers to jump to it."""
    scope = rename_scope(tree, spec, text, edit_start, edit_end, set(renamed) | set(written))
    # A function or class still defined under the old name is not renamed: the edit called another
    # one here (`_v(x)` -> `rgb_to_yiq(x)`), and the other calls of the old one stay right.
    renamed = set(renamed) - still_defined(text, tree, spec, set(renamed))
    uses = renamed_uses(text, tree, set(renamed), (edit_start, edit_end), scope) if renamed else []
    reached = renamed_uses(text, tree, set(reach), (edit_start, edit_end)) if reach else []
    calls = call_arguments(text, tree, set(reach), (edit_start, edit_end)) if reach else []
    lo, hi = _grown(text, tree, spec, edit_start, edit_end, max_lines, uses + reached)
    inside = _rows_within(text, uses, lo, hi)
    arguments = _rows_within(text, calls, lo, hi)
    if not inside and not arguments and (uses or calls):
        first = text.count("\n", 0, edit_start)
        at, end = min(uses + calls, key=lambda u: (abs(text.count("\n", 0, u[0]) - first), u[0]))
        lo, hi = _grown(text, tree, spec, at, end, max_lines, uses + reached)
        inside, arguments = _rows_within(text, uses, lo, hi), _rows_within(text, calls, lo, hi)
    return Region(lo, hi + 1, inside, arguments, tree is not None and spec is not None)


def _grown(text: str, tree: Any, spec: Any, start: int, end: int, max_lines: int,
           toward: list[tuple[int, int]]) -> tuple[int, int]:
    """Rows [lo, hi] of the window around [start, end): a few lines, grown to the enclosing
    syntax node (lines only without a grammar), then toward `toward`, nearest first, all
    within `max_lines`."""
    n_lines = text.count("\n") + 1
    first = text.count("\n", 0, start)
    last = text.count("\n", 0, max(start, end))
    lo, hi = max(0, first - WINDOW_LINES), min(n_lines - 1, last + WINDOW_LINES)
    if tree is not None and spec is not None:
        rows = _enclosing_rows(tree, spec, text, start, end, max_lines)
        if rows is not None:
            lo, hi = min(lo, rows[0]), max(hi, rows[1])
    else:  # no grammar: a plain window of lines, as wide as allowed
        half = max(WINDOW_LINES, (max_lines - (last - first + 1)) // 2)
        lo, hi = max(0, first - half), min(n_lines - 1, last + half)
    lo, hi = _cap(lo, hi, first, last, max_lines)
    for use, _ in sorted(toward, key=lambda u: abs(text.count("\n", 0, u[0]) - first)):
        row = text.count("\n", 0, use)
        if max(hi, row) - min(lo, row) + 1 <= max_lines:
            lo, hi = min(lo, row), max(hi, row)
    return lo, hi


def _rows_within(text: str, places: list[tuple[int, int]], lo: int, hi: int) -> tuple[tuple[int, int], ...]:
    return tuple(p for p in places if lo <= text.count("\n", 0, p[0]) <= hi)


def _cap(lo: int, hi: int, first: int, last: int, max_lines: int) -> tuple[int, int]:
    """[lo, hi] cut to `max_lines`, keeping the edited rows and as even a margin as fits."""
    if hi - lo + 1 <= max_lines:
        return lo, hi
    if last - first + 1 >= max_lines:  # an edit longer than the cap: its first lines
        return first, first + max_lines - 1
    room = max(0, max_lines - (last - first + 1))
    before = min(first - lo, room // 2)
    after = min(hi - last, room - before)
    before = min(first - lo, room - after)
    return first - before, min(hi, max(last, last + after))
