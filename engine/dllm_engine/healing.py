"""Whitespace healing: a prefix that ends in spaces is cut back before it is tokenized.

Byte-level BPE tokenizers (ours, Qwen2's, LLaMA's) fold the spaces before a
word into the word's token: `    return` is `"   " + " return"`. A prefix that
ends in the indentation of a fresh line, or in the space after `return`, ends
in a whitespace token that training only ever saw before a newline or more
whitespace, never before a word; a model asked to continue it writes space-led
fragments. So the engine moves that trailing whitespace into the hole, where
the model writes it as part of its natural tokens (the training holes start at
line starts and token boundaries), and takes the typed whitespace back off the
fill: the user's indentation wins over the model's.
"""

from __future__ import annotations

BLANKS = " \t"


def heal(prefix: str) -> tuple[str, str]:
    """(prefix for the model, the typed whitespace moved into the hole)."""
    stripped = prefix.rstrip(BLANKS)
    return stripped, prefix[len(stripped):]


def unheal(text: str, typed: str) -> str:
    """The fill as it goes after the user's text: when the user typed blanks, the fill's
    own leading blanks go (the typed ones, or deeper indentation, or a tab: the user's
    indentation wins); a fill that starts with a line break or with text is kept whole."""
    return text.lstrip(BLANKS) if typed else text
