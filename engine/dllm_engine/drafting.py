"""Draft tokens for a left-to-right canvas, checked by the model in the same pass.

A shifted-logit base decoded in blocks of 1 commits one token per pass, and each
pass costs about the same whether it runs two rows or twenty (on a CPU, reading the
weights dominates). So each pass also runs a guess of the next few tokens (a draft)
as causal rows after the current slot: the row holding draft token i gives the
model's own choice for the slot after it. A draft token is kept while it equals the
model's greedy choice at its slot given the kept tokens before it, and the model's
token at the first mismatch is committed too (speculative decoding's acceptance rule
with the model as its own verifier). Greedy output is unchanged: every committed
token is the one one-token-per-pass decoding would have committed. A sampling canvas
(best of N's samples) checks with its own draws instead of the greedy choice: a draft
token is kept while the draw at its slot equals it, so each kept token is a draw from
the model given the tokens before it, as one token per pass would draw it.

The drafts come from the text itself, as prompt-lookup decoding does: code repeats
itself, and an infill's context holds both sides of the hole (the suffix comes first
in the native layout), so the tokens after an earlier occurrence of the fill's last
few tokens are a good guess for what comes next. A guess that finds nothing costs
nothing: the pass runs as it would have. The guesses, best first (chains_for): what
followed an earlier occurrence of the fill's last 2 or 3 tokens (a long match rarely
misleads), the draft head's chains (draft_head.py: the base's own state carried a few
tokens ahead), what followed the last token alone (before the head where the head is
unsure of its first token); at a canvas's first slot the head's sure guess goes first, and
at a healed first slot only a chain whose first token may stand there. A pass checks them
all as a draft tree (draft_tree.py: the first is the trunk, in the canvas slots; the others
branch off it), or with EngineConfig.draft_tree_tokens 0 the first alone. Measured with the
shipped head on HumanEval single-line (`tasks[::5]`, benchmarks/RESULTS.md): one chain, the
head between the two lookup lengths, 1.67 fill tokens a pass (lookup alone 1.44); with this
ranking and the first slot's rules 1.95 (thirty-fourth session); the tree: see draft_tree.py.
"""

from __future__ import annotations

import torch

from .draft_tree import build_tree

MAX_NGRAM = 3  # the longest run of trailing tokens looked up (longest first)
# The ranking of a pass's guesses (chains_for), measured offline on 2,073 passes of this
# repository's lines and checked on 1,398 of HumanEval single-line (benchmarks/RESULTS.md,
# thirty-fourth session): where a pass after the first had both, what followed an earlier
# occurrence of the text's last 2 or 3 tokens was kept 1.48 / 1.18 tokens deep, the head's
# guess 0.49 / 0.61; a match of the last token alone beat the head where the head gave its
# own first guess under 0.3 (0.5-0.7 tokens against 0.2-0.4), not above it. At a canvas's
# first slot the head, which starts from the base's reading of the whole context, was kept
# deeper than a match of the context's last tokens (0.95 / 1.20 against 0.78 / 0.38).
PREFERRED_NGRAM = 2  # a text match at least this long outranks the draft head's guess
HEAD_UNSURE = 0.3  # the head's first-token probability under which a 1-token match outranks it


def lookup_draft(history: torch.Tensor, length: int, min_ngram: int = 1,
                 stop_at: torch.Tensor | None = None) -> torch.Tensor:
    """long [<= length]: the tokens that followed the latest earlier occurrence of the
    longest trailing n-gram of `history` (1-D long, oldest first) that occurs earlier;
    empty when none does. `stop_at` (bool [V]): tokens a draft never runs through
    (layout markers, end tokens), so a draft does not cross from suffix to prefix."""
    total = history.numel()
    if length <= 0 or total < 2:
        return history.new_empty(0)
    for n in range(min(MAX_NGRAM, total - 1), min_ngram - 1, -1):
        tail = history[total - n:]
        # Windows that end before the last token, so each has a token after it.
        windows = history[: total - 1].unfold(0, n, 1)  # [total - n, n]
        hits = (windows == tail).all(-1).nonzero().squeeze(-1)
        if not hits.numel():
            continue
        start = int(hits[-1]) + n  # the latest occurrence: code nearby is the likeliest to repeat
        draft = history[start:start + length]
        if stop_at is not None and draft.numel():
            stops = stop_at[draft].nonzero()
            if stops.numel():
                draft = draft[: int(stops[0])]
        return draft
    return history.new_empty(0)


def long_match(history: torch.Tensor, stop_at: torch.Tensor | None = None) -> bool:
    """Whether the next pass will draft from a match of PREFERRED_NGRAM tokens or more
    (canvas_drafts' first choice), so a draft head's guess for it would go unused."""
    return bool(lookup_draft(history, 1, min_ngram=PREFERRED_NGRAM, stop_at=stop_at).numel())


def accepted_run(model_tokens: list[int], draft: list[int]) -> int:
    """How many of the model's tokens (its choice at the current slot, then at each slot
    after a draft token) are committed: up to and including the first that differs from
    the draft there, or all of them when the whole draft matches."""
    for i, token in enumerate(model_tokens):
        if i >= len(draft) or token != draft[i]:
            return i + 1
    return len(model_tokens)


def history_of(a, canvas: torch.Tensor, current: int) -> torch.Tensor:
    """long [T]: what the hole's model has read before slot `current`: its context (which
    under block decoding already holds the fill's older slots), the held-out last token,
    and the committed slots not yet folded into the context."""
    ctx = a.context
    done = canvas[ctx.absorbed:current].cpu()
    return torch.cat((ctx.ids, torch.tensor([ctx.last_id]), done))


def chains_for(a, history: torch.Tensor, current: int, room: int, stop_at: torch.Tensor,
               tree: bool) -> list[list[int]]:
    """The guesses of what follows slot `current` of hole `a`, best first: what followed an
    earlier occurrence of the text's last PREFERRED_NGRAM or more tokens, the draft head's best
    chain (after a match of the last token alone when the head is unsure of its first token:
    HEAD_UNSURE), what followed such a match, the head's other chains. One (the first there
    is) unless `tree` (draft_tree.py), when every distinct one is checked, as far as the tree's
    budget goes (measured offline on HumanEval single-line, 6 tokens: lookups and the head's
    best chain 1.93 fill tokens a pass, the head's second chain before the short match 1.87)."""
    fits = _first_slot_rule(a, current)
    heads, sure = [], True
    if a.head_draft is not None and a.head_draft[0] == current:
        guessed = [(fits(c[:room]), p) for c, p in zip(a.head_draft[1], a.head_draft[2])]
        heads = [c for c, _ in guessed if c]
        sure = bool(guessed) and bool(guessed[0][0]) and guessed[0][1] >= HEAD_UNSURE
    head_first = current == 0 and sure  # a canvas's first slot: the head read the whole context, a match only its end
    if head_first and heads and not tree:
        return heads[:1]
    long = fits(lookup_draft(history, room, min_ngram=PREFERRED_NGRAM, stop_at=stop_at).tolist())
    if long and not tree:
        return [long]
    short = fits(lookup_draft(history, room, stop_at=stop_at).tolist()) if tree or not long else []
    if heads and not tree and (sure or not short):
        return heads[:1]
    if head_first:
        order = (*heads[:1], long, short, *heads[1:])
    else:
        order = (long, *heads[:1], short, *heads[1:]) if sure else (long, short, *heads)
    out = []
    for chain in order:
        if chain and chain not in out:
            out.append(chain)
    return out if tree else out[:1]


def _first_slot_rule(a, current: int):
    """chain -> chain, or [] when its first token cannot stand at slot `current`: at a healed
    canvas's slot 0 only tokens that extend the backed-up text may (`a.first_allowed`, the
    engine's restriction of the base's choice there), and a text match that follows an earlier
    occurrence of the context's last tokens often starts with one that does not (a newline
    whose indentation is not the healed one's)."""
    allowed = getattr(a, "first_allowed", None)
    if current != 0 or allowed is None:
        return lambda chain: chain
    return lambda chain: chain if chain and bool(allowed[chain[0]]) else []


def canvas_drafts(active: list, canvases: torch.Tensor, window: torch.Tensor, mask_id: int,
                  limit: int, stop_at: torch.Tensor, tree: int = 0):
    """long [B, W] (-1 where none): a draft for every greedy canvas whose current slot is
    the only one in its window (blocks of 1) and whose text has a lookup match, filling
    masked slots from the current one on, at most `limit` and never past the canvas
    (the token after the last draft token must have a slot too). None when no canvas has one.
    With `tree` (the most draft tokens a canvas's tree holds), (drafts, branches): the draft is
    a draft tree's trunk, and `branches` (per canvas, a list of draft_tree.BranchNode) its
    other guesses; (None, None) when no canvas has any. A canvas that samples or bans some
    starts has a trunk alone."""
    drafts = torch.full_like(canvases, -1)
    branches = [[] for _ in active]
    current = window.float().argmax(-1).tolist()
    any_draft = False
    for row, a in enumerate(active):
        if a.context.ids is None:
            continue  # (a sampling canvas draws its checked tokens: Engine._accept_drafts)
        c, n = current[row], a.canvas.numel()
        room = min(limit, n - c - 1)
        if room <= 0 or int(window[row].sum()) != 1:
            continue
        if not bool((canvases[row, c:c + room] == mask_id).all()):
            room = int((canvases[row, c:c + room] == mask_id).int().cumprod(0).sum())
        forked = tree > 0 and a.temperature == 0 and getattr(a, "start_ban", None) is None
        chains = chains_for(a, history_of(a, canvases[row], c), c, room, stop_at, forked)
        trunk, branches[row] = build_tree(chains, c, room, tree if forked else room)
        if trunk:
            drafts[row, c:c + len(trunk)] = torch.tensor(trunk, device=drafts.device)
            any_draft = True
    if not tree:
        return drafts if any_draft else None
    return (drafts, branches) if any_draft else (None, None)


def row_drafts(active: list, canvases: torch.Tensor, window: torch.Tensor, drafts: torch.Tensor | None,
               limit: int, rows: int) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(drafts, probes) for a pass with draft rows (draft_adapter.py). A canvas the text
    offers no draft for takes its last pass's draft-row guesses (`a.row_draft`) when they
    start at its current slot; `probes` (bool [B, W]) are the slots the draft rows
    predict: masked slots after the last draft token (its own slot runs as the first
    draft row, masked), `rows` of them, inside the canvas. (None, None) parts when empty."""
    out = drafts if drafts is not None else torch.full_like(canvases, -1)
    probes = torch.zeros_like(canvases, dtype=torch.bool)
    current = window.float().argmax(-1).tolist()
    for row, a in enumerate(active):
        if a.temperature > 0 or a.context.ids is None or int(window[row].sum()) != 1:
            continue
        c, n = current[row], a.canvas.numel()
        k = int((out[row] >= 0).sum())
        if not k and a.row_draft is not None and a.row_draft[0] == c:
            guess = torch.tensor(a.row_draft[1][:max(0, min(limit, n - c - 1))], dtype=torch.long)
            if guess.numel():
                out[row, c:c + guess.numel()] = guess.to(out.device)
                k = guess.numel()
        first = c + k + 1
        last = min(c + k + rows, n - 1)
        if first <= last:
            probes[row, first:last + 1] = True
    any_draft = bool((out >= 0).any())
    return (out if any_draft else None), (probes if bool(probes.any()) else None)
