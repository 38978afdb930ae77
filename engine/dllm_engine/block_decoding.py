"""Canvas passes for a shifted-logit model in the native layout, optionally in blocks.

A pretrained autoregressive base reads slot j's token from the row before it. The
runner holds the context's last token out of the cache and runs it as row 0 of each
pass (it sees the context alone, so slot 0 gets the base's own next-token head); the
next rows are canvas slots, and slot j's logits come from the row before slot j.

Block decoding (`decode_block` B > 0): blocks of B slots, causal between blocks and
bidirectional inside one, committed left to right. A finished block is final and sees
nothing after it, exactly like context tokens. So with `absorb` (the engine's own
holes) a pass runs [last token, slots finished since the last pass (causal), the
current block], and afterwards the finished rows' K/V are appended to the hole's
context in the prefix cache (in place when the hole owns the entry's tail): each pass
runs one block plus the slots just finished. With B = 1 that is the base's own
incremental decoding after reading the suffix: two rows a pass, not the whole canvas.
Without `absorb` (scoring), every row from the first canvas slot runs.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from .layout import shifted_canvas_mask

# Fresh serials for contexts that grew (apart from EncodedContext's own counter's range).
_serials = itertools.count(10**12)


def first_masked_block(masked: torch.Tensor, block: int) -> torch.Tensor:
    """long [B]: the index of each canvas's first block that still holds a mask (`masked`,
    bool [B, W], real slots only); past the last block when none does."""
    width = masked.shape[1]
    slot = torch.arange(width, device=masked.device)[None].expand_as(masked)
    return torch.where(masked, slot, torch.full_like(slot, width)).min(-1).values // block


def current_block_starts(canvases: torch.Tensor, lens: torch.Tensor, block: int, mask_id: int) -> torch.Tensor:
    """long [B]: the first slot of each canvas's first block that still holds a mask (at most its length)."""
    real = torch.arange(canvases.shape[1], device=canvases.device)[None] < lens[:, None]
    return torch.minimum(first_masked_block((canvases == mask_id) & real, block) * block, lens)


def shifted_canvas_logits(runner, contexts, canvases: torch.Tensor, canvas_lens: torch.Tensor,
                          rows: torch.Tensor | None, compact: bool, absorb: bool,
                          drafts: torch.Tensor | None = None, draft_rows: bool = False,
                          branches: list | None = None):
    """canvas_logits for a shifted-logit model (see the module docstring); the same contract
    as ModelRunner.canvas_logits: [B, W, V], or [M, V] for `rows` with `compact`.

    `drafts` (long [B, W], -1 where none): guessed tokens the pass runs in masked slots
    (drafting.py), so the slot after each gets the model's logits given the guess. The
    canvas itself (which slots are finished) is read from `canvases` alone. `draft_rows`: the
    rows that show a mask run with the model's draft adapter (draft_adapter.py).
    `branches` (blocks of 1, compact only; per canvas a list of draft_tree.BranchNode): more
    guesses, run as extra rows after the canvas's (see _branch_rows); then the return is
    (logits, branch_logits [N, V], one row per node, canvas by canvas), and the model's
    `last_hidden` holds the canvas rows' states followed by the nodes'."""
    b, width = canvases.shape
    block, dev = runner.block, runner.device
    offset = torch.tensor([c.absorbed for c in contexts], device=dev)  # slots already in each context
    if absorb and block:
        done = current_block_starts(canvases, canvas_lens, block, runner.config.mask_token_id) - offset
    else:
        done = torch.zeros_like(offset)
    lens = canvas_lens - offset  # canvas slots from the first not in the context
    want_slots = torch.arange(width, device=dev)[None] < canvas_lens[:, None]
    if rows is not None:
        want_slots = want_slots & rows
    # Rows of the pass, per canvas: [last token, slots offset .. offset + run - 1]; slot
    # offset + j is read from row j (the row before it). Run up to the last slot asked for (its block's end
    # under block decoding: the block is bidirectional; with blocks of 1 its own row is
    # seen by nothing).
    slot = torch.arange(width, device=dev)[None].expand(b, -1)
    last_wanted = torch.where(want_slots, slot, torch.full_like(slot, -1)).max(-1).values - offset  # [B]
    if block == 1:
        need = last_wanted
    elif block:
        need = torch.where(last_wanted >= 0, (last_wanted // block + 1) * block, last_wanted + 1)
    else:
        need = lens
    need = torch.minimum(torch.maximum(need, done), lens).clamp(min=0)
    run = max(0, int(need.max()))
    extra = max((len(n) for n in branches), default=0) if branches is not None else 0
    # Blocks of 1: room for the rest of the canvas, so the buffer outlives the folds (fold_committed).
    spare = width + 1 if absorb and block == 1 else 0
    batch = runner._stack_contexts(contexts, run + 1 + extra, spare)
    ctx_lens, t_max = batch.lens, batch.t_max
    src = (offset[:, None] + torch.arange(run, device=dev)[None]).clamp(max=width - 1)
    last_ids = torch.tensor([c.last_id for c in contexts], dtype=torch.long, device=dev)
    shown = canvases if drafts is None else torch.where(drafts >= 0, drafts, canvases)
    ids = torch.cat((last_ids[:, None], shown.gather(1, src)), dim=1)  # [B, 1 + run]
    positions = ctx_lens[:, None] + torch.arange(1 + run, device=dev)[None]
    # Block ids: row 0 and the finished rows are causal (each its own block, before any
    # current one); the current blocks follow, bidirectional inside each.
    r = torch.arange(1 + run, device=dev)[None]
    inside = (r - 1 - done[:, None]).clamp(min=0) // (block or max(run, 1))
    blocks = torch.where(r <= done[:, None], r - done[:, None] - 1, inside)
    real = r <= need[:, None]
    mask = shifted_canvas_mask(ctx_lens, t_max, blocks, real)
    past = [(k, v, t_max) for k, v in batch.kv]
    # Row j's output is slot offset + j's prediction.
    target = offset[:, None] + r  # [B, 1 + run]
    want = want_slots.gather(1, target.clamp(max=width - 1)) & (target < canvas_lens[:, None]) & real
    # Blocks of 1: every row of the pass may join the context once the pass's commits are
    # known (fold_committed), so the pass keeps its K/V.
    keep = absorb and block == 1
    fold = absorb and block and bool((done > 0).any())
    adapted = {"draft_rows": real & (ids == runner.config.mask_token_id)} if draft_rows else {}
    canvas_rows = 1 + run
    if extra:
        if not (compact and rows is not None and block == 1):
            raise ValueError("draft branches need blocks of 1 and compact logits")
        ids, positions, mask, want, real = _branch_rows(branches, extra, ids, positions, mask, want, real,
                                                        offset, ctx_lens, t_max, runner.config.mask_token_id)
    logits, new_kv = runner.model(ids, positions, mask=mask, past=past, logits_rows=want,
                                  compact=compact and rows is not None, return_kv=fold or keep, **adapted)
    if fold:
        _append_finished(runner, contexts, canvases, offset, done, new_kv)
    runner.last_pass = PassRows(contexts, ids.cpu(), real.cpu(), done.tolist(), offset.tolist(), new_kv,
                                batch, canvas_rows) if keep else None
    if branches is not None:
        # The compact rows are row-major over (canvas, row): the canvas rows' logits go first
        # (the order rows.nonzero() promises), then every canvas's nodes'.
        is_branch = (want.nonzero(as_tuple=True)[1] >= canvas_rows)
        hidden = runner.model.last_hidden
        if hidden is not None:
            runner.model.last_hidden = torch.cat((hidden[~is_branch], hidden[is_branch]))
        return logits[~is_branch], logits[is_branch]
    if compact and rows is not None:
        return logits  # row-major over (canvas, slot): the same order as rows.nonzero()
    out = logits.new_zeros(b, width, logits.shape[-1])
    for i in range(b):  # back to the caller's slots
        n = min(1 + run, width - int(offset[i]))
        out[i, int(offset[i]):int(offset[i]) + n] = logits[i, :n]
    return out


def _branch_rows(branches, extra: int, ids, positions, mask, want, real, offset, ctx_lens, t_max: int,
                 mask_id: int):
    """The pass's tensors with `extra` rows appended per canvas for its draft-tree branches
    (draft_tree.py): node e of canvas i runs as row R + e, at the position its slot has,
    seeing the context, the trunk's rows up to its parent (the row showing the slot
    before it) and its own ancestors among the nodes. Padding rows see the context and
    themselves (a row that sees nothing would be NaN) and ask for no logits."""
    b, r = ids.shape
    ext_ids = torch.full((b, extra), mask_id, dtype=torch.long)
    ext_pos = torch.zeros((b, extra), dtype=torch.long)
    ext_real = torch.zeros((b, extra), dtype=torch.bool)
    pass_sees = mask[:, 0, :, t_max:].cpu()  # [B, R, R]: the canvas rows' view of each other
    sees = torch.zeros((b, extra, r + extra), dtype=torch.bool)  # [B, X, R + X]
    sees[:, torch.arange(extra), r + torch.arange(extra)] = True
    for i, nodes in enumerate(branches):
        off = int(offset[i])
        for e, node in enumerate(nodes):
            ext_ids[i, e] = node.token
            ext_pos[i, e] = node.slot - off + 1  # the row the slot has in the canvas's run
            if node.parent < 0:
                parent = node.slot - off  # the trunk row showing the slot before
                sees[i, e, :r] |= pass_sees[i, parent]
            else:
                assert node.parent < e, "a branch node comes after its parent"
                sees[i, e] |= sees[i, node.parent]
            ext_real[i, e] = True
    dev = ids.device
    ctx_ok = torch.arange(t_max, device=dev)[None] < ctx_lens[:, None]  # [B, Tmax]
    top = torch.cat((mask, torch.zeros((b, 1, r, extra), dtype=torch.bool, device=dev)), dim=-1)
    bottom = torch.cat((ctx_ok[:, None, None, :].expand(-1, 1, extra, -1), sees[:, None].to(dev)), dim=-1)
    return (torch.cat((ids, ext_ids.to(dev)), 1), torch.cat((positions, ctx_lens[:, None] + ext_pos.to(dev)), 1),
            torch.cat((top, bottom), 2), torch.cat((want, ext_real.to(dev)), 1), torch.cat((real, ext_real.to(dev)), 1))


@dataclass
class PassRows:
    """What a blocks-of-1 pass ran, kept until its commits are known (fold_committed)."""
    contexts: list
    ids: torch.Tensor  # long [B, R]: row 0 the held-out token, row r the token shown at slot offset + r - 1
    real: torch.Tensor  # bool [B, R]
    done: list[int]  # rows 0 .. done - 1 joined the context already (_append_finished)
    offset: list[int]
    kv: list  # per layer (k, v), [B, Hkv, R, D]
    batch: object = None  # the runner's StackedContexts the pass ran on (its rows are written in it)
    canvas_rows: int = 0  # rows before the draft-tree branches' (all of them when 0)


def _rows_kv(new_kv, i: int, start: int, stop: int) -> torch.Tensor:
    return torch.stack([torch.stack((k[i, :, start:stop], v[i, :, start:stop])) for k, v in new_kv])  # [layers, 2, Hkv, n, D]


def _fold(runner, ctx, tokens: torch.Tensor, kv: torch.Tensor, last_id: int, absorbed: int) -> None:
    """`tokens` (with their K/V from this pass, exact: nothing after them was visible) join
    the context, and `last_id` becomes its held-out token. In place: contexts are the
    engine's own per-hole objects."""
    ids = torch.cat((ctx.ids, tokens))
    have = ctx.ids.numel()
    key, entry, reuse = runner.cache.lookup(ids, full=True)
    if entry is not None and reuse >= have:  # the hole's own entry (or one that holds more of it)
        extra = kv[:, :, :, reuse - have:]
        stored = runner.cache.store(ids, key, reuse, extra) if extra.shape[3] else entry
        ctx.kv = stored.buf[:, :, :, :ids.numel()]
    else:  # its entry was evicted meanwhile: encode the context again
        ctx.kv = runner._encode(ids).kv
    ctx.length, ctx.ids = ids.numel(), ids
    ctx.last_id, ctx.absorbed = last_id, absorbed
    ctx.last_hidden = None  # (that of the old last token)
    ctx.serial = next(_serials)  # a new identity: batch buffers stacked from the old K/V are stale


def _append_finished(runner, contexts, canvases, offset, done, new_kv) -> None:
    """Before the pass's commits: the context's held-out token and the slots finished since
    it was last extended, but the newest, join the context; the newest is held out."""
    for i, ctx in enumerate(contexts):
        n = int(done[i])  # finished slots not yet in the context: rows 0 .. n-1 join it
        if n <= 0:
            continue
        start = int(offset[i]) + n
        finished = canvases[i, int(offset[i]):start].cpu()
        tokens = torch.cat((torch.tensor([ctx.last_id]), finished[:-1]))
        _fold(runner, ctx, tokens, _rows_kv(new_kv, i, 0, n), int(finished[-1]), start)


def fold_committed(runner, canvases: torch.Tensor, mask_id: int, paths: dict | None = None) -> None:
    """After a blocks-of-1 pass's commits (`canvases`, [B, W]): every row of the pass whose
    token is now committed joins its context, so the next pass runs only the newest
    committed token (held out) and what follows it, not the rows this pass ran already.
    Row d (the held-out token) and each row after it whose shown token (a draft) equals the
    committed one join, as long as the slot after them is committed (it is held out).
    `paths` {canvas: (current slot, [draft_tree.PathStep])}: canvases whose commits came
    through a draft-tree branch; the rows that join are the trunk's up to the current slot,
    then the path's (their K/V saw exactly the committed tokens before them)."""
    p, runner.last_pass = runner.last_pass, None
    if p is None:
        return
    rows = canvases.cpu()
    last_row = p.canvas_rows or p.ids.shape[1]
    for i, ctx in enumerate(p.contexts):
        d, off, width = p.done[i], p.offset[i], rows.shape[1]
        if off + d >= width or int(rows[i, off + d]) == mask_id:
            continue  # nothing committed after the held-out token: keep it held out
        old_length = ctx.length
        if paths and i in paths:
            current, path = paths[i]
            picked = list(range(d, current - off + 1)) + [
                step.slot - off + 1 if step.branch < 0 else last_row + step.branch for step in path]
            at = torch.tensor(picked)
            kv = torch.stack([torch.stack((k[i][:, at], v[i][:, at])) for k, v in p.kv])
            held = current + len(path)
            _fold(runner, ctx, p.ids[i, at], kv, int(rows[i, held]), held + 1)
        else:
            j = d  # fold rows d .. j and hold out slot off + j
            while (j + 1 < last_row and bool(p.real[i, j + 1]) and off + j + 1 < width
                   and int(p.ids[i, j + 1]) == int(rows[i, off + j]) and int(rows[i, off + j + 1]) != mask_id):
                j += 1
            _fold(runner, ctx, p.ids[i, d:j + 1], _rows_kv(p.kv, i, d, j + 1), int(rows[i, off + j]), off + j + 1)
        if d == 0 and len(p.contexts) == 1 and p.batch is not None:
            # These rows sit right after the context in the pass's batch buffer: keep the
            # buffer for the grown context (no re-stacking of the whole context next pass).
            runner.carry_batch(p.batch, ctx, old_length)
