"""A tree of drafts checked in one pass: several guesses of what follows, not one.

Why: one draft chain is often wrong at its first token (the draft head's top guess agrees
with the base about half the time). Checking the text lookup's chains and the head's top
few chains together, as tree drafts do for autoregressive models (SpecInfer, Medusa,
EAGLE-2), commits the longest of them that the model agrees with. Measured on HumanEval
single-line (`tasks[::5]`, the default model, benchmarks/RESULTS.md, twenty-eighth
session): one chain 1.81 fill tokens a pass, a tree of 6 draft tokens with the head's two
best chains 2.12, the same fills.

What it costs: a row per guessed token. On a GPU a pass of a few rows is bound by reading
the weights once and launching kernels, so rows are nearly free. On a CPU they are not:
with the default model's int4 weights on 2 cores a pass cost 26.9 ms with one chain and
37.5 ms with the tree, so the tree's 14% fewer passes made a line 19% slower. So the
engine's default (EngineConfig.draft_tree_tokens) is one chain on a CPU.

The tree has a trunk and branches. The trunk is the first chain: it runs in the canvas
slots themselves, as a single draft always did (drafting.py), so everything that reads
the canvas works unchanged. Every other chain adds only the tokens where it leaves the
trunk (or another branch): BranchNodes, run as extra rows of the pass that see the
context, the trunk up to where they leave it, and their own ancestors (block_decoding.py).

Greedy output is unchanged: a committed token is always the model's choice given the
committed tokens before it, whichever chain carried them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BranchNode:
    """A guessed token at canvas slot `slot`, read after `parent`: the index of another
    BranchNode of the same canvas, or -1 for the trunk's row showing slot `slot - 1` (the
    trunk's draft token there, or the committed token before the current slot)."""
    token: int
    slot: int
    parent: int = -1


@dataclass(frozen=True)
class PathStep:
    """One accepted draft token on the way to the pass's commits: the trunk's at `slot`
    (branch -1), or BranchNode `branch`'s."""
    slot: int
    branch: int = -1


def build_tree(chains: list[list[int]], current: int, room: int,
               budget: int | None = None) -> tuple[list[int], list[BranchNode]]:
    """(trunk, branches) for `chains` (guesses of the tokens from slot `current` on, best
    first; each cut to `room` tokens): the first non-empty chain is the trunk, and each
    later chain adds the nodes where it leaves what is already in the tree, while the tree
    holds fewer than `budget` tokens (a pass's rows: the rest of a chain is dropped)."""
    budget = room * max(1, len(chains)) if budget is None else budget
    chains = [c[:room] for c in chains if c and room > 0]
    if not chains or budget <= 0:
        return [], []
    trunk, branches = list(chains[0][:budget]), []
    children: dict[tuple[int, int, int], int] = {}  # (parent, token, slot) -> branch index
    for chain in chains[1:]:
        parent, on_trunk = -1, True
        for i, token in enumerate(chain):
            slot = current + i
            if on_trunk and i < len(trunk) and trunk[i] == token:
                continue  # still on the trunk
            on_trunk = False
            key = (parent, token, slot)
            if key not in children:
                if len(trunk) + len(branches) >= budget:
                    break
                children[key] = len(branches)
                branches.append(BranchNode(token, slot, parent))
            parent = children[key]
    return trunk, branches


def walk(first: int, current: int, trunk: list[int], trunk_picks: list[int],
         branches: list[BranchNode], branch_picks: list[int]) -> tuple[list[int], list[PathStep]]:
    """(tokens, path): the tokens the pass commits from slot `current` on, and the draft
    tokens they were read after. `first`: the model's token at the current slot;
    `trunk_picks[j]`: its token for slot current + j + 1, read after trunk token j;
    `branch_picks[i]`: its token for slot branches[i].slot + 1, read after branch i. A
    token is committed while the token before it is a draft token the tree holds on the
    path so far (speculative decoding's rule, over a tree)."""
    tokens, path = [first], []
    slot, node = current, -1  # node: the branch the path is on, -1 while on the trunk
    while True:
        want = tokens[-1]
        j = slot - current
        if node == -1 and j < len(trunk) and trunk[j] == want:
            path.append(PathStep(slot))
            tokens.append(trunk_picks[j])
        else:
            # (a branch hanging off the trunk, parent -1, is reachable only while the path is on it)
            nxt = next((i for i, b in enumerate(branches)
                        if b.slot == slot and b.parent == node and b.token == want), None)
            if nxt is None:
                return tokens, path
            node = nxt
            path.append(PathStep(slot, nxt))
            tokens.append(branch_picks[nxt])
        slot += 1

