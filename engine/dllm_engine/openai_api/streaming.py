"""What a streamed fill may send so far: the settled text, held back while it could change.

The engine reports after every pass the committed run from the hole's start
(`SettledText`: every slot up to the first still-masked one). With re-masking off
those tokens are final, but their text is not yet all sendable:
- a byte-level token may end in half a UTF-8 character, which decodes as U+FFFD
  until the next token completes it: trailing U+FFFD is held back;
- a stop string may begin in the settled text and end in tokens still masked, and
  the final fill is cut before the first stop: a tail that is the beginning of a
  stop is held back, and a stop found whole cuts the stream there. The suffix's head
  (`Hole.stop_at_suffix`, suffix_stop.py) is such a stop too, found where the engine
  finds it;
- blanks after the settled text's last line break, before a suffix that brings its own
  indentation, are dropped from the final fill unless text follows them
  (trailing_indent.py): they are held back until it does.
- a fill whose end the engine chooses once it is finished (`Hole.choose_end`, fill_end.py)
  may be cut at any of its line breaks: only its first line is sent as it settles (every cut
  holds it), the rest once the end is chosen.
What is sent is therefore always a prefix of the final text, so the chunks of a fill
join to exactly the text the same request gets without streaming.
"""

from __future__ import annotations

import json
import logging

from ..fill_end import chosen_end, kept_by_every_cut
from ..protocol import Hole
from ..suffix_stop import suffix_cut, suffix_head
from ..trailing_indent import trailing_indent_cut

log = logging.getLogger("dllm_engine.daemon")

REPLACEMENT = "\ufffd"  # what a decoder writes for a partial UTF-8 sequence


def sendable(text: str, stop: tuple[str, ...], head: str | None = None, prefix: str = "",
             suffix: str = "", chosen_end: str | None = None) -> str:
    """The longest prefix of settled `text` that no later token can change (`head`: the
    suffix's, which ends the fill where suffix_cut finds it after `prefix`; `suffix`: the
    hole's, before which a fill's trailing blanks go; `chosen_end`: fill_end.hole_end's answer
    for a hole whose end is chosen, which a cut may end before the fill's first line break, or
    inside a line)."""
    text = text.rstrip(REPLACEMENT)
    if (at := trailing_indent_cut(text, suffix)) >= 0:
        text = text[:at]
    found = [i for i in (text.find(s) for s in stop) if i >= 0]
    if (at := suffix_cut(text, head, prefix)) >= 0:
        found.append(at)
    if found:  # the final fill is cut before the first stop found whole
        text = text[: min(found)]
    if chosen_end is not None:
        text = kept_by_every_cut(text, chosen_end, suffix)
    # A stop may still start in a tail of `text` that is a beginning of it: hold that tail.
    ends = (*stop, head) if head else stop
    held = max((k for s in ends for k in range(1, min(len(s), len(text) + 1)) if text.endswith(s[:k])), default=0)
    return text[: len(text) - held]


class FillStream:
    """The text one hole has sent, and what to send next."""

    def __init__(self, stop: tuple[str, ...], head: str | None = None, prefix: str = "", suffix: str = "",
                 chosen_end: str | None = None) -> None:
        self.stop, self.head, self.prefix, self.suffix = stop, head, prefix, suffix
        self.chosen_end = chosen_end
        self.sent = ""

    @classmethod
    def for_hole(cls, hole: Hole) -> "FillStream":
        return cls(hole.stop, suffix_head(hole.suffix) if hole.stop_at_suffix else None, hole.prefix, hole.suffix,
                   chosen_end(hole))

    def settled(self, text: str) -> str:
        """The new text to send for the settled run `text` (maybe "")."""
        safe = sendable(text, self.stop, self.head, self.prefix, self.suffix, self.chosen_end)
        if len(safe) <= len(self.sent) or not safe.startswith(self.sent):
            return ""
        delta, self.sent = safe[len(self.sent):], safe
        return delta

    def final(self, text: str) -> str:
        """The rest of the fill once the engine has finished it."""
        if not text.startswith(self.sent):  # cannot happen with a prefix-stable decoder; never silent
            log.error("streamed text %r is not a prefix of the final fill %r", self.sent, text)
            return ""
        delta, self.sent = text[len(self.sent):], text
        return delta


def sse(payload: dict | str) -> bytes:
    """One server-sent event as OpenAI sends them: a bare `data:` line (no event name)."""
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {data}\n\n".encode()


DONE = sse("[DONE]")
