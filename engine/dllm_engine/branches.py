"""Branches for best of N: fills that start with a name the code after the hole uses.

A small base in our layout reads the suffix but rarely acts on it: in `total = 0; for line
in lines: <hole>; return total` it writes `words = line.split()`, a line the suffix never
reads, because `total` is not among its likely first words (12th session: not in its top 8).
Yet the same base, reading left to right, finds `total += len(line.split())` followed by
`return total` far likelier than `words = line.split()` followed by it (candidate_scoring.py).
So where best of N is asked for, a copy of the hole may start with such a name: the hole's
prefix gets the name as if the user had typed it (token healing then treats it as a
half-typed word), the base continues greedily, and the scorer judges that fill against the
others like any candidate. The names: identifiers on the suffix's first lines that are
still inside the block (not a new top-level definition) and that the prefix's recent lines
already use, skipping keywords and the receiver names every method uses.

Only for a hole at the start of a statement (its line holds nothing but indentation, or
nothing at all): a hole in the middle of a line continues what is there.
"""

from __future__ import annotations

import re

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SUFFIX_LINES = 3  # the suffix's first non-blank lines whose names may start a branch
PREFIX_CHARS = 4000  # how far back the prefix must use a name
# Keywords and literals of the languages the server serves, and receiver names: a branch on
# one of these says nothing about what the suffix needs.
COMMON = frozenset("""
and as assert async await break case catch class const continue def del elif else enum except export extends false
final finally fn for from func function go if impl import in interface is lambda let match mod module mut new nil
nonlocal none not null or package pass print private protected pub public raise return self static struct super
switch this throw true try type typeof use var void while with yield cls None True False
""".split())


def branch_words(prefix: str, suffix: str, limit: int) -> list[str]:
    """Up to `limit` names to start a branch with, in the order the suffix uses them."""
    line = prefix[prefix.rfind("\n") + 1:]
    if limit <= 0 or line.strip():
        return []
    recent = set(IDENT.findall(prefix[-PREFIX_CHARS:]))
    words: list[str] = []
    for text in _block_lines(suffix, rest_of_line=bool(line)):
        for word in IDENT.findall(_code_part(text)):
            if len(word) > 1 and word not in COMMON and word in recent and word not in words:
                words.append(word)
    return words[:limit]


def branch_prefix(prefix: str, word: str) -> str:
    """The hole's prefix with `word` typed at the start of the statement: after the line's
    indentation, or, on an empty line, after the indentation the statement would take (the
    last code line's, one level deeper after a line that opens a block)."""
    line = prefix[prefix.rfind("\n") + 1:]
    if line or not prefix:
        return prefix + word
    lines = [t for t in prefix.split("\n") if t.strip()]
    if not lines:
        return prefix + word
    last = lines[-1]
    indent = last[: len(last) - len(last.lstrip())]
    if last.rstrip().endswith((":", "{")):
        indent += _indent_unit(lines)
    return prefix + indent + word


def _block_lines(suffix: str, rest_of_line: bool) -> list[str]:
    """The suffix's first SUFFIX_LINES non-blank lines after the hole's own line, up to the
    first at column 0 (a new top-level statement: outside the hole's block). `rest_of_line`:
    the suffix starts with the rest of the hole's line (the cursor sat after indentation),
    not with the next line (a hole that was a whole line, its line break included)."""
    out = []
    for text in suffix.split("\n")[1 if rest_of_line else 0:]:
        if not text.strip():
            continue
        if not text[:1].isspace():
            break
        out.append(text)
        if len(out) == SUFFIX_LINES:
            break
    return out


def _code_part(text: str) -> str:
    """A line without its string literals and its trailing comment (roughly: names there are prose)."""
    text = re.sub(r"(\"[^\"]*\"|'[^']*')", " ", text)
    return text.split("#", 1)[0].split("//", 1)[0]


def _indent_unit(lines: list[str]) -> str:
    """The file's indentation step: a tab, or the smallest positive run of leading spaces (4 if none)."""
    if any(t.startswith("\t") for t in lines):
        return "\t"
    widths = [len(t) - len(t.lstrip(" ")) for t in lines]
    return " " * min((w for w in widths if w > 0), default=4)
