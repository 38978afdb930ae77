"""Token healing: the end of a prefix is moved into the hole before it is tokenized.

A BPE tokenizer (ours, Qwen2's, LLaMA's) never ends a training prefix where a
cursor in an editor usually sits:
- blanks: the spaces before a word fold into the word's token (`    return`
  is `"   " + " return"`), so a prefix ending in the indentation of a fresh
  line, or in the space after `return`, ends in a token that training only saw
  before a newline or more blanks, and the model writes space-led fragments;
- a partial word: `    ret` ends in the token ` ret`, which training only saw
  where the word really was `ret`; `urn` after it is a split BPE never makes.

So trailing blanks are cut off the prefix text (the model writes them as part of
its natural tokens and they are taken back off the fill: the user's indentation
wins), and a prefix that ends in a word character gives up its last token: the
fill's first token is constrained to start with that token's text, and the text
is taken back off the fill. The fill then starts on a token boundary, as every
training hole does.

A line break is healed the same way where the vocabulary merges it with what follows
(SmolLM2's `"\n   "` is one token: a prefix ending in `"\n"` ends where the base never
saw a token end); with a tokenizer that keeps newlines apart it is left alone.

Blanks typed at a line's start are the line's indentation so far, and the model is
told it: the healed line break's first token must hold all of it but one blank (the
base puts a line's last blank of indentation in front of the word, `"\n       " +
" return"` for eight), so a user who dedented gets a statement of that level, not the
block's next one. That indentation may be a part of the line's (a selection or a
span that starts inside it): where the fill's own indentation goes deeper on from the
typed blanks, the rest is kept, so the fill continues the text it was cut from (the
language server aligns a suggestion's first line to the cursor's anyway).
"""

from __future__ import annotations

import bisect
from collections import OrderedDict

import torch

BLANKS = " \t"
MAX_CACHED = 256


def heal(prefix: str) -> tuple[str, str]:
    """(prefix for the model, the typed blanks moved into the hole)."""
    stripped = prefix.rstrip(BLANKS)
    return stripped, prefix[len(stripped):]


def unheal(text: str, typed: str, indenting: bool = False) -> str:
    """The fill as it goes after the user's text: when the user typed blanks, the fill's
    own leading blanks go (the typed ones, shallower ones, or a tab: the user's indentation
    wins), but for `indenting` (the typed blanks are the line's whole start) blanks that go
    on deeper from the typed ones keep what goes on; a fill that starts with a line break
    or with text is kept whole."""
    if not typed:
        return text
    body = text.lstrip(BLANKS)
    lead = text[:len(text) - len(body)]
    if indenting and len(lead) > len(typed) and lead.startswith(typed):
        return text[len(typed):]
    return body


def ends_in_word(text: str) -> bool:
    return bool(text) and (text[-1].isalnum() or text[-1] == "_")


def is_line_break(text: str) -> bool:
    return bool(text) and "\n" in text and not text.strip()


class TokenHealer:
    """Backs up a prefix's last word token and constrains the fill's first token to extend it."""

    def __init__(self, tokenizer, vocab_size: int, device: torch.device) -> None:
        self.device = device
        n = min(vocab_size, tokenizer.vocab_size)
        # Decoded once: what each token writes (specials decode to "" and never match),
        # and sorted, so the tokens extending a word are one bisected range: a keystroke
        # costs O(log V + matches) even with a 150k vocabulary.
        self.texts = [tokenizer.decode([i]) for i in range(n)]
        order = sorted(range(n), key=self.texts.__getitem__)
        self._sorted = [self.texts[i] for i in order]
        self._ids = torch.tensor(order, dtype=torch.long)
        self.vocab_size = vocab_size
        self._cache: OrderedDict[str, torch.Tensor | None] = OrderedDict()

    def back_up(self, prefix_ids: list[int], decode, words: bool = True,
                indent: str = "") -> tuple[list[int], str, torch.Tensor | None]:
        """(prefix ids without the healed token, its text, bool [V] allowed first tokens) or unchanged.
        `words=False` (the user typed blanks after the text): only a line break is healed;
        `indent`: those blanks, which a healed line break's first token must hold but one of."""
        if len(prefix_ids) < 2:
            return prefix_ids, "", None
        word = decode(prefix_ids[-1:])
        if not ((words and ends_in_word(word)) or is_line_break(word)):
            return prefix_ids, "", None
        allowed = self.allowed(word)
        if allowed is None or (is_line_break(word) and not self.merges_indentation(word)):
            return prefix_ids, "", None  # no token joins this line break to indentation: it is a boundary
        if is_line_break(word) and len(indent) > 1:
            allowed = self._indented(word, indent[:-1], allowed)
        return prefix_ids[:-1], word, allowed

    def _indented(self, line_break: str, blanks: str, allowed: torch.Tensor) -> torch.Tensor:
        """The tokens that start with the line break and `blanks`; where the vocabulary merges
        fewer blanks into a line break, those that start with its longest such run."""
        for n in range(len(blanks), 0, -1):
            deeper = self.allowed(line_break + blanks[:n])
            if deeper is not None:
                return deeper
        return allowed

    def merges_indentation(self, line_break: str) -> bool:
        """Whether some token is this line break followed by blanks (SmolLM2's "\n   ")."""
        for blank in BLANKS:
            probe = line_break + blank
            i = bisect.bisect_left(self._sorted, probe)
            if i < len(self._sorted) and self._sorted[i].startswith(probe):
                return True
        return False

    def allowed(self, word: str) -> torch.Tensor | None:
        """bool [V]: tokens whose text starts with `word` (None if none does)."""
        if word in self._cache:
            self._cache.move_to_end(word)
            return self._cache[word]
        lo = bisect.bisect_left(self._sorted, word)
        hi = bisect.bisect_left(self._sorted, word[:-1] + chr(ord(word[-1]) + 1), lo)
        mask = None
        if hi > lo:
            mask = torch.zeros(self.vocab_size, dtype=torch.bool)
            mask[self._ids[lo:hi]] = True
            mask = mask.to(self.device)
        self._cache[word] = mask
        if len(self._cache) > MAX_CACHED:
            self._cache.popitem(last=False)
        return mask
