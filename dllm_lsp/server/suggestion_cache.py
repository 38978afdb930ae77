"""Recent suggestions, so typing through ghost text is answered without the engine.

When the user types the first characters of a suggestion that is on screen,
the rest of it is still the right suggestion. An entry remembers the text
around the position where the suggestion was made; a later request matches
when the text before the cursor is that same text followed by a prefix of the
suggestion, and the text after the cursor is unchanged.

A suggestion that ran to its line's end and was typed (or accepted) all the way answers
"nothing" at that end: the fill ended the line there, and the user's next key is Enter. The
editor asks there at once (VS Code re-triggers after an accept; Neovim after its debounce, as
soon as the user pauses before Enter), and sending that request to the engine would cancel
the next line's prefetch (prefetch.py) the user is about to need.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

ANCHOR_CHARS = 256  # how much text either side identifies the place a suggestion was made


@dataclass(frozen=True)
class CachedSuggestion:
    text: str  # what to insert at the cursor
    replace_chars: int  # characters after the cursor that the insertion replaces (closers)
    prefetched: bool = False  # filled ahead of the request (prefetch.py), not asked for


@dataclass(frozen=True)
class _Entry:
    uri: str
    before: str  # up to ANCHOR_CHARS of text before where the suggestion was made
    after: str  # up to ANCHOR_CHARS of text after it
    suggestion: CachedSuggestion


class SuggestionCache:
    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[tuple[str, str, str], _Entry] = OrderedDict()
        self.prefetch_served = 0  # requests answered at the very place a prefetched entry was made for

    def put(self, uri: str, text: str, offset: int, suggestion: CachedSuggestion) -> None:
        """An empty suggestion is kept only when prefetched: it answers "nothing here" at its
        very place (the same plan and engine would fill nothing again)."""
        if not suggestion.text and not suggestion.prefetched:
            return
        before, after = text[max(0, offset - ANCHOR_CHARS):offset], text[offset:offset + ANCHOR_CHARS]
        key = (uri, before, after)
        self._entries.pop(key, None)
        self._entries[key] = _Entry(uri, before, after, suggestion)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def get(self, uri: str, text: str, offset: int) -> CachedSuggestion | None:
        """The rest of a cached suggestion the user is typing through, or None; an empty text is
        a prefetch that found nothing to suggest here, or a line's suggestion typed to its end."""
        found = self._find(uri, text, offset)
        if found is None:
            return None
        key, entry, typed = found
        rest = entry.suggestion.text[typed:]
        self._entries.move_to_end(key)
        if entry.suggestion.prefetched and typed == 0:
            self.prefetch_served += 1
        return CachedSuggestion(rest, entry.suggestion.replace_chars, entry.suggestion.prefetched)

    def has(self, uri: str, text: str, offset: int) -> bool:
        """Whether `get` would answer here (counting nothing, reordering nothing)."""
        return self._find(uri, text, offset) is not None

    def _find(self, uri: str, text: str, offset: int) -> "tuple[tuple[str, str, str], _Entry, int] | None":
        after = text[offset:offset + ANCHOR_CHARS]
        for key in reversed(self._entries):  # newest first
            entry = self._entries[key]
            if entry.uri != uri or entry.after != after:
                continue
            typed = self._typed(entry, text, offset)
            if typed is None:
                continue  # not this place
            if entry.suggestion.text and typed == len(entry.suggestion.text) and not _at_line_end(after):
                continue  # typed all of a mid-line suggestion: what follows it is a new question
            return key, entry, typed
        return None

    @staticmethod
    def _typed(entry: _Entry, text: str, offset: int) -> int | None:
        """How many characters of the suggestion were typed, if the text matches."""
        suggestion = entry.suggestion.text
        for typed in range(min(len(suggestion), offset), -1, -1):
            anchor = offset - typed
            if text[anchor:offset] != suggestion[:typed]:
                continue
            if text[max(0, anchor - ANCHOR_CHARS):anchor] == entry.before:
                return typed
        return None

    def clear(self, uri: str | None = None) -> None:
        if uri is None:
            self._entries.clear()
        else:
            for key in [k for k in self._entries if k[0] == uri]:
                del self._entries[key]


def _at_line_end(after: str) -> bool:
    return after == "" or after.startswith(("\n", "\r"))
