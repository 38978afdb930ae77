"""Drafting on the default model (a shifted-logit base decoded in blocks of 1): the draft
tokens checked in each pass change how many passes a fill takes, never what it says.
fp32, so "the same tokens" is exact (bf16 GEMMs may round differently with more rows)."""

import pytest

from dllm_engine.protocol import Hole, InfillRequest

REPEATING = (
    "import os\n\n"
    "CONFIG = {\n"
    '    "host": os.environ.get("APP_HOST", "localhost"),\n'
    '    "port": os.environ.get("APP_PORT", "8080"),\n'
    '    "user": '
)
HOLES = [
    Hole(prefix=REPEATING, suffix="\n}\n", max_tokens=32, stop=("\n",)),
    Hole(prefix="import os\n\n\ndef home():\n    return os.path.", suffix="\n", max_tokens=16, stop=("\n",)),
    Hole(prefix="x = 1\ny = ", suffix="\nprint(x + y)\n", max_tokens=8),
]


@pytest.fixture(scope="module")
def engines():
    from dllm_engine.engine import Engine, EngineConfig

    # The text's lookup alone (the shipped draft head has its own test below)
    built = {k: Engine(EngineConfig(model="default", threads=1, dtype="float32", weights="native", draft_tokens=k,
                                    draft_head="none")) for k in (0, 8)}
    yield built
    for e in built.values():
        e.shutdown()


def test_drafted_fills_equal_one_token_per_pass_alone_and_batched(engines):
    plain = [engines[0].infill(InfillRequest(holes=[h])).holes[0] for h in HOLES]
    alone = [engines[8].infill(InfillRequest(holes=[h])).holes[0] for h in HOLES]
    batched = engines[8].infill(InfillRequest(holes=list(HOLES))).holes  # one pass serves all three canvases
    for p, a, b in zip(plain, alone, batched):
        assert a.text == p.text and b.text == p.text
        assert a.tokens == p.tokens and b.tokens == p.tokens
        assert a.passes <= p.passes and b.passes <= p.passes
    assert all(n == 1 for n in plain[0].committed_per_pass)  # one token per pass without drafts
    # The repeated line is copied from the text: several tokens a pass
    assert plain[0].text.startswith("os.environ.get(")
    assert alone[0].passes < plain[0].passes / 2 and max(alone[0].committed_per_pass) > 2


def test_a_fill_keeps_its_batch_buffer_across_passes(engines, monkeypatch):
    """Blocks of 1: each pass's committed rows join the context right where the pass wrote
    them in the batch buffer, so the buffer is carried over (runner.carry_batch) instead of
    the whole context's K/V being stacked again every pass; the fill is the same either way."""
    engine = engines[8]
    runner = engine.runner
    made = []
    stack = runner._stack_contexts

    def counting(contexts, canvas_len, spare=0):
        batch = stack(contexts, canvas_len, spare)
        if all(batch is not b for b in made):
            made.append(batch)
        return batch

    monkeypatch.setattr(runner, "_stack_contexts", counting)
    hole = Hole(prefix=REPEATING, suffix="\n}\n", max_tokens=32, stop=("\n",))
    carried = engine.infill(InfillRequest(holes=[hole])).holes[0]
    buffers_carried = len(made)
    made.clear()
    monkeypatch.setattr(runner, "carry_batch", lambda *args: None)
    restacked = engine.infill(InfillRequest(holes=[hole])).holes[0]
    assert carried.text == restacked.text and carried.passes == restacked.passes
    assert carried.passes >= 4
    # One buffer per canvas size (the canvas grows from 8 slots to 16 on this fill), not per pass
    assert buffers_carried <= 2 and len(made) == restacked.passes


NOVEL = [  # lines whose tokens the text does not repeat: the text's lookup rarely drafts here
    Hole(prefix="def mean(values):\n    if not values:\n        raise ValueError('empty')\n    return ",
         suffix="\n", max_tokens=16, stop=("\n",)),
    Hole(prefix="import json\n\n\ndef load(path):\n    with open(path) as f:\n        return ",
         suffix="\n", max_tokens=16, stop=("\n",)),
    Hole(prefix="class Point:\n    def __init__(self, x, y):\n        ", suffix="\n        self.y = y\n",
         max_tokens=16, stop=("\n",)),
]


def test_the_shipped_draft_rows_save_passes_and_change_no_token(engines):
    """The shipped draft adapter (draft_adapter.py): each pass's draft rows guess the tokens
    after the current one, the next pass checks them; the same fills in fewer passes."""
    from dllm_engine.engine import Engine, EngineConfig

    with_rows = Engine(EngineConfig(model="default", threads=1, dtype="float32", weights="native", draft_tokens=8,
                                    draft_rows=3, draft_head="none"))
    no_rows = engines[8]
    assert no_rows.draft_rows == 0  # off by default
    try:
        assert with_rows.draft_rows == 3 and with_rows.loaded.model.draft_adapter is not None
        rows = [with_rows.infill(InfillRequest(holes=[h])).holes[0] for h in NOVEL]
    finally:
        with_rows.shutdown()
    plain = [no_rows.infill(InfillRequest(holes=[h])).holes[0] for h in NOVEL]
    for p, r in zip(plain, rows):
        assert r.text == p.text and r.tokens == p.tokens
    assert sum(r.passes for r in rows) < sum(p.passes for p in plain)


def test_the_shipped_draft_head_saves_passes_and_changes_no_token(engines):
    """The shipped draft head (draft_head.py, trained on one GPU): where the text offers no
    full-length match, the pass checks the head's guess of the next tokens; the same fills in
    fewer passes, alone and batched, at the shipped draft length."""
    from dllm_engine.engine import Engine, EngineConfig

    with_head = Engine(EngineConfig(model="default", threads=1, dtype="float32", weights="native"))
    without = Engine(EngineConfig(model="default", threads=1, dtype="float32", weights="native", draft_head="none"))
    try:
        assert with_head.draft_head is not None and without.draft_head is None
        assert with_head.draft_head.config.base == "smollm2-135m"
        guessed = [with_head.infill(InfillRequest(holes=[h])).holes[0] for h in NOVEL]
        batched = with_head.infill(InfillRequest(holes=list(NOVEL))).holes
        plain = [without.infill(InfillRequest(holes=[h])).holes[0] for h in NOVEL]
    finally:
        with_head.shutdown()
        without.shutdown()
    for p, g, b in zip(plain, guessed, batched):
        assert g.text == p.text == b.text and g.tokens == p.tokens == b.tokens
    assert sum(g.passes for g in guessed) < sum(p.passes for p in plain)
    assert sum(b.passes for b in batched) < sum(p.passes for p in plain)


def test_a_sampling_canvas_checks_drafts_with_its_own_draws(engines):
    """At a temperature low enough that every draw is the top token, a sampled fill with lookup
    drafts is the greedy fill, in fewer passes than one token at a time (the drafts were checked
    with the canvas's own draws, not skipped)."""
    from dllm_engine.protocol import DiffusionParams

    cold = DiffusionParams(temperature=1e-3, seed=3)
    hole = HOLES[0]  # the text repeats itself: the lookup offers drafts
    greedy = engines[0].infill(InfillRequest(holes=[hole])).holes[0]
    drawn = engines[8].infill(InfillRequest(holes=[hole], params=cold)).holes[0]
    one_at_a_time = engines[0].infill(InfillRequest(holes=[hole], params=cold)).holes[0]
    assert drawn.text == greedy.text == one_at_a_time.text
    assert drawn.passes < one_at_a_time.passes


def test_a_draft_tree_checks_several_guesses_a_pass_and_changes_no_token(monkeypatch):
    """A draft tree (draft_tree.py; a GPU's default, a CPU's option): each pass checks the text
    lookup's chains and the shipped head's two likeliest chains together, and a canvas's first
    pass checks the head's guesses from its context's last hidden state. The same fills as
    one chain a pass (a CPU's default), alone and batched, in fewer passes; some commits came
    through a branch, not the trunk."""
    from dllm_engine.engine import Engine, EngineConfig

    tree = Engine(EngineConfig(model="default", threads=1, dtype="float32", weights="native", draft_tree_tokens=6,
                               draft_branches=2))
    chain = Engine(EngineConfig(model="default", threads=1, dtype="float32", weights="native"))
    assert chain.config.draft_tree_tokens == 0  # one chain on a CPU
    through_branches, first_guesses = [], []
    fold = tree.runner.fold_committed
    monkeypatch.setattr(tree.runner, "fold_committed",
                        lambda canvases, paths=None: (through_branches.append(paths) if paths else None,
                                                      fold(canvases, paths))[1])
    first = Engine._first_head_draft
    monkeypatch.setattr(Engine, "_first_head_draft",
                        lambda self, a: (first(self, a), first_guesses.append(a.head_draft))[0])
    holes = NOVEL + HOLES
    try:
        assert tree.config.draft_tree_tokens > 0 and tree.runner.context_hidden
        grown = [tree.infill(InfillRequest(holes=[h])).holes[0] for h in holes]
        batched = tree.infill(InfillRequest(holes=list(holes))).holes
        one = [chain.infill(InfillRequest(holes=[h])).holes[0] for h in holes]
    finally:
        tree.shutdown()
        chain.shutdown()
    for t, b, c in zip(grown, batched, one):
        assert t.text == b.text == c.text and t.tokens == b.tokens == c.tokens
    assert sum(t.passes for t in grown) < sum(c.passes for c in one)
    assert sum(b.passes for b in batched) < sum(c.passes for c in one)
    assert through_branches  # a branch carried some commits (its rows joined the context)
    guessed = [g for g in first_guesses if g is not None]
    assert guessed and all(slot == 0 and chains and len(probs) == len(chains) for slot, chains, probs in guessed)


def _with_head_and_one_token_a_pass(holes):
    """Each hole filled alone with the shipped draft head (the default decoding, a line's end on the
    head's word included: these holes' ends are the base's), and one token a pass."""
    from dllm_engine.engine import Engine, EngineConfig

    with_head = Engine(EngineConfig(model="default", threads=1, dtype="float32", weights="native"))
    one_at_a_time = Engine(EngineConfig(model="default", threads=1, dtype="float32", weights="native",
                                        draft_tokens=0))
    try:
        return ([with_head.infill(InfillRequest(holes=[h])).holes[0] for h in holes],
                [one_at_a_time.infill(InfillRequest(holes=[h])).holes[0] for h in holes])
    finally:
        with_head.shutdown()
        one_at_a_time.shutdown()


LINE_STARTS = [  # holes at a line's start, its indentation part of the fill: slot 0 is healed
    Hole(prefix="def mean(values):\n    if not values:\n        raise ValueError('empty')\n\n",
         suffix="\n", max_tokens=16, stop=("\n",)),
    Hole(prefix="import json\n\n\ndef load(path):\n    with open(path) as f:\n", suffix="\n", max_tokens=16,
         stop=("\n",)),
    Hole(prefix="class Point:\n    def __init__(self, x, y):\n        self.x = x\n", suffix="\n\n    def norm(self):\n",
         max_tokens=16, stop=("\n",)),
    Hole(prefix="def total(items):\n    result = 0\n    for item in items:\n        result += item.price\n\n",
         suffix="\n", max_tokens=16, stop=("\n",)),
]


def test_a_first_pass_drafts_only_what_a_healed_first_slot_may_take(monkeypatch):
    """At a healed canvas's slot 0 the base may only take a token that extends the backed-up
    text (a newline before the line's indentation): the first pass's draft, whether the head's
    guess or a text match, starts with such a token, so the first pass can keep it (before,
    the head guessed as if unhealed, e.g. '\\n   ' where only '\\n\\n   ' could stand, and most
    first passes kept one token). Fills unchanged; fewer passes than one token at a time."""
    import dllm_engine.engine as engine_module

    first_drafts = []
    plan = engine_module.canvas_drafts

    def spy(active, canvases, window, *args, **kwargs):
        out = plan(active, canvases, window, *args, **kwargs)
        drafts = out[0] if isinstance(out, tuple) else out
        for row, a in enumerate(active):
            if drafts is not None and bool(window[row, 0]) and int(drafts[row, 0]) >= 0 and a.first_allowed is not None:
                first_drafts.append(bool(a.first_allowed[int(drafts[row, 0])]))
        return out

    monkeypatch.setattr(engine_module, "canvas_drafts", spy)
    drafted, plain = _with_head_and_one_token_a_pass(LINE_STARTS)
    assert len(first_drafts) == len(LINE_STARTS) and all(first_drafts), first_drafts
    for d, p in zip(drafted, plain):
        assert d.text == p.text and d.tokens == p.tokens
    assert sum(d.committed_per_pass[0] for d in drafted) > len(LINE_STARTS)  # first passes keep drafts


EMPTY_BODIES = [  # new functions' empty bodies, where the draft head would guess a docstring after the line break
    Hole(prefix="import os\n\n\ndef read_config(path):\n    with open(path) as f:\n        return f.read()\n\n\n"
                "def test():\n    ",
         suffix="\n\n\nif __name__ == '__main__':\n    test()\n", max_tokens=48, stop_indent=4, max_lines=4),
    Hole(prefix="import math\n\n\ndef area(r):\n    return math.pi * r * r\n\n\ndef circumference(r):\n    ",
         suffix="\n", max_tokens=48, stop_indent=4, max_lines=4),
]


def test_an_empty_bodys_drafts_obey_its_banned_starts(monkeypatch):
    """Hole.banned_starts (no docstring or comment first: the language server's empty body):
    the base may not write a banned token while the fill is blank, so the draft head's guesses
    there skip banned tokens too (a chain guessing `\"\"\"` after the line break was refused
    at it, a pass's draft lost). Every guess made under the ban obeys it; fills unchanged."""
    from dllm_engine import draft_head
    from dllm_lsp.syntax.languages import language_named

    prose = language_named("python").prose_starts
    holes = [Hole(**{**h.__dict__, "banned_starts": prose}) for h in EMPTY_BODIES]
    seen = []
    guess = draft_head.DraftHead.guess_chains

    def spy(self, hidden, tokens, steps, width, first_allowed=None, start_ban=None, ends=None):
        out = guess(self, hidden, tokens, steps, width, first_allowed, start_ban, ends)
        if start_ban is not None:
            seen.append((out[0], *start_ban))
        return out

    monkeypatch.setattr(draft_head.DraftHead, "guess_chains", spy)
    drafted, plain = _with_head_and_one_token_a_pass(holes)
    for d, p in zip(drafted, plain):
        # (the tokens written may differ: a pass's kept drafts can run past where the block's end cuts)
        assert d.text == p.text and d.text.strip() and d.passes < p.passes
        assert not d.text.lstrip().startswith(prose)
    assert seen  # the head guessed under a live ban
    for chains, banned, blank in seen:
        for row, row_chains in enumerate(chains.tolist()):
            for chain in row_chains:
                for j, t in enumerate(chain):
                    if all(bool(blank[c]) for c in chain[:j]):
                        assert not bool(banned[row, t]), (chain, j)


def test_a_healed_slots_restriction_ends_once_the_slot_is_written(monkeypatch):
    """Blocks of 1 never re-mask a committed slot: a healed hole's slot 0 is restricted in its
    first pass only (before, every pass of the fill applied the spent restriction again);
    the same fills."""
    from dllm_engine.engine import Engine, EngineConfig

    restricted = []
    real = Engine._restrict_first_slot
    monkeypatch.setattr(Engine, "_restrict_first_slot",
                        lambda self, logits, canvases, masked, active, healed, compact:
                        (restricted.append(len(healed)), real(self, logits, canvases, masked, active, healed, compact))[1])
    engine = Engine(EngineConfig(model="default", threads=1, dtype="float32", weights="native"))
    try:
        fills = [engine.infill(InfillRequest(holes=[h])).holes[0] for h in LINE_STARTS]
        assert len(restricted) == len(LINE_STARTS)  # one pass each
        restricted.clear()
        batched = engine.infill(InfillRequest(holes=list(LINE_STARTS))).holes
    finally:
        engine.shutdown()
    assert restricted == [len(LINE_STARTS)]  # the batch's first pass, every hole at once
    assert all(f.passes > 1 for f in fills)
    for f, b in zip(fills, batched):
        assert f.text == b.text and f.text.strip()
