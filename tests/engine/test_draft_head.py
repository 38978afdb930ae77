"""The draft head (draft_head.py): its guesses after the newest committed token are the next
pass's draft, checked by the base like any draft, so fills never change; a head that guesses
right saves passes; training it (training/draft_head.py) raises its agreement with the base.

A tiny random shifted-logit model decoded in blocks of 1 (the default model's decoding), fp32,
so "the same" is exact."""

import csv
from pathlib import Path

import pytest
import torch

from dllm_engine import draft_head
from dllm_engine.checkpoint import load
from dllm_engine.model_config import CheckpointError
from dllm_engine.protocol import Hole, InfillRequest
from dllm_engine.weight_only import int4_available

ROOT = Path(__file__).resolve().parents[2]
HOLES = [Hole(prefix="def add(a, b):\n    return ", suffix="\n", max_tokens=12),
         Hole(prefix="x = 1\ny = ", suffix="\nprint(x + y)\n", max_tokens=10),
         Hole(prefix="import os\n\npath = os.", suffix="\n", max_tokens=14)]


def random_head(model, scale=0.5, seed=0, vocab=None):
    torch.manual_seed(seed)
    cfg = model.config
    ids = torch.arange(cfg.vocab_size if vocab is None else vocab)
    head = draft_head.DraftHead(draft_head.DraftHeadConfig(cfg.hidden_size, inner=32, blocks=1, steps=3,
                                                           vocab=ids.numel()), model.model.embed_tokens.weight, ids)
    with torch.no_grad():
        for p in head.parameters():
            p.normal_(std=scale)
    return head


@pytest.fixture(scope="module")
def head_dir(tiny_shifted_model, tmp_path_factory):
    loaded = load(str(tiny_shifted_model))
    folder = tmp_path_factory.mktemp("head")
    random_head(loaded.model).save(folder)
    return folder


def engine_for(model, **kw):
    from dllm_engine.engine import Engine, EngineConfig

    return Engine(EngineConfig(model=str(model), threads=1, dtype="float32", heal=False, **kw))


def test_a_saved_head_loads_back_the_same(tiny_shifted_model, head_dir):
    loaded = load(str(tiny_shifted_model))
    head = draft_head.attach(loaded, str(head_dir))
    fresh = random_head(loaded.model)
    hidden, tokens = torch.randn(4, loaded.config.hidden_size), torch.tensor([5, 6, 7, 8])
    assert head.vocab_ids.tolist() == fresh.vocab_ids.tolist()
    # bf16 on disk: the same guesses as the head it was saved from, rounded the same way
    assert torch.equal(head.guess(hidden, tokens, 3), fresh.to(torch.bfloat16).float().guess(hidden, tokens, 3))
    assert head.guess(hidden, tokens, 0).shape == (4, 0)
    # a draft tree's chains: the head's likeliest first tokens, best first, each then greedy
    top = head.guess_top(hidden, tokens, 3, 3)
    assert top.shape == (4, 3, 3) and torch.equal(top[:, 0], head.guess(hidden, tokens, 3))
    first = head.logits(head.step(hidden.to(head.head.dtype), tokens)).topk(3).indices
    assert torch.equal(top[:, :, 0], head.vocab_ids[first])


def test_a_restricted_first_guess_is_one_of_the_allowed_tokens(tiny_shifted_model):
    """guess_top's `first_allowed`: each row's first guess is its likeliest allowed token (a
    healed slot 0's), and the steps after it follow from that guess; a row none of whose
    allowed tokens the head can guess keeps its unrestricted guess."""
    loaded = load(str(tiny_shifted_model))
    vocab = loaded.config.vocab_size
    head = random_head(loaded.model, vocab=vocab // 2)  # guesses only the lower half's tokens
    hidden, tokens = torch.randn(3, loaded.config.hidden_size), torch.tensor([5, 6, 7])
    free = head.guess_top(hidden, tokens, 3, 2)
    allowed = torch.zeros(3, vocab, dtype=torch.bool)
    allowed[0, [10, 11, 12]] = True  # three tokens the head can guess
    allowed[1, [int(free[1, 0, 0]), 13]] = True  # the free guess among them: unchanged
    allowed[2, vocab - 3:] = True  # only tokens outside the head's vocabulary
    kept = head.guess_top(hidden, tokens, 3, 2, first_allowed=allowed)
    scores = head.logits(head.step(hidden.to(head.head.dtype), tokens))[0, [10, 11, 12]]
    assert kept[0, :, 0].tolist() == [10 + i for i in scores.topk(2).indices.tolist()]
    assert torch.equal(kept[1, 0], free[1, 0])
    assert torch.equal(kept[2], free[2])
    # a chain goes on from its (restricted) first token as a free guess from it would
    again = head.guess_top(hidden[:1], tokens[:1], 3, 1, first_allowed=allowed[:1])
    assert torch.equal(again[0, 0], kept[0, 0])
    # the first tokens' probabilities, best first: among the allowed tokens where restricted
    chains, probs = head.guess_chains(hidden, tokens, 3, 3, first_allowed=allowed)[:2]
    assert torch.equal(chains[:, :2], kept) and probs.shape == (3, 3)
    assert torch.allclose(probs[0].sum(), torch.tensor(1.0)) and bool((probs[:, :-1] >= probs[:, 1:]).all())
    free_probs = head.guess_chains(hidden, tokens, 3, 3)[1]
    assert torch.allclose(probs[2], free_probs[2]) and float(free_probs[0].sum()) < 1


def test_a_start_ban_holds_while_a_chain_is_blank(tiny_shifted_model):
    """guess_chains' `start_ban` (Hole.banned_starts as the base obeys it): while a chain's
    guesses are all blank tokens, the next may not be a banned one; once a chain has written
    text, the ban is over; a row without a ban guesses as before."""
    loaded = load(str(tiny_shifted_model))
    vocab = loaded.config.vocab_size
    head = random_head(loaded.model, vocab=vocab)
    hidden, tokens = torch.randn(2, loaded.config.hidden_size), torch.tensor([5, 6])
    free = head.guess_top(hidden, tokens, 4, 1)
    blank = torch.zeros(vocab, dtype=torch.bool)
    banned = torch.zeros(2, vocab, dtype=torch.bool)
    # row 0: its free first guess counts as blank, its free second guess is banned
    blank[int(free[0, 0, 0])] = True
    banned[0, int(free[0, 0, 1])] = True
    kept = head.guess_top(hidden, tokens, 4, 1, start_ban=(banned, blank))
    assert kept[0, 0, 0] == free[0, 0, 0] and kept[0, 0, 1] != free[0, 0, 1]
    assert torch.equal(kept[1], free[1])  # no ban on row 1
    # with the first guess banned, the chain starts elsewhere
    first = banned.clone()
    first[0, int(free[0, 0, 0])] = True
    assert head.guess_top(hidden, tokens, 4, 1, start_ban=(first, blank))[0, 0, 0] != free[0, 0, 0]
    # a chain that has written text is past the ban: nothing blank, so only its first guess obeys it
    after = head.guess_top(hidden, tokens, 4, 1, start_ban=(banned, torch.zeros_like(blank)))
    assert torch.equal(after[0], free[0]) or bool(banned[0, int(free[0, 0, 0])])
    # over many rows and chains: no banned token ever follows only blanks
    n = 16
    hidden, tokens = torch.randn(n, loaded.config.hidden_size), torch.randint(5, vocab, (n,))
    blank = torch.rand(vocab) < 0.5
    banned = torch.rand(n, vocab) < 0.3
    chains = head.guess_top(hidden, tokens, 4, 3, start_ban=(banned, blank))
    for row in range(n):
        for chain in chains[row].tolist():
            for j, t in enumerate(chain):
                if all(bool(blank[c]) for c in chain[:j]):
                    assert not bool(banned[row, t]), (row, chain, j)


def test_fills_are_the_same_with_the_head_on_and_off(tiny_shifted_model, head_dir):
    on = engine_for(tiny_shifted_model, draft_head=str(head_dir))
    off = engine_for(tiny_shifted_model, draft_head="none")
    try:
        assert on.draft_head is not None and off.draft_head is None
        alone_on = [on.infill(InfillRequest(holes=[h])).holes[0] for h in HOLES]
        alone_off = [off.infill(InfillRequest(holes=[h])).holes[0] for h in HOLES]
        batched = on.infill(InfillRequest(holes=HOLES)).holes
        for a, b, c in zip(alone_on, alone_off, batched):
            assert a.text == b.text == c.text
            assert a.tokens == b.tokens == c.tokens
    finally:
        on.shutdown()
        off.shutdown()


def test_a_head_that_guesses_right_saves_passes(tiny_shifted_model, head_dir, monkeypatch):
    """A head whose guesses are the base's own next tokens (the canvas of a run without it):
    every pass checks its guess and keeps it (the first from the context's own last hidden
    state), so the fill takes far fewer passes. This checks that the head starts from the right row and token: a head fed the
    token before or after the newest committed one would guess wrong, and nothing would be kept."""
    from dllm_engine.engine import Engine

    canvases = []
    finish = Engine._finish_hole

    def record(self, a, reason):
        canvases.append(a.canvas.tolist())
        return finish(self, a, reason)

    monkeypatch.setattr(Engine, "_finish_hole", record)
    off = engine_for(tiny_shifted_model, draft_head="none", draft_tokens=3)
    try:
        plain = off.infill(InfillRequest(holes=[HOLES[0]])).holes[0]
    finally:
        off.shutdown()
    truth = canvases[0]
    assert plain.passes >= 6
    seen = []

    def oracle(self, hidden, tokens, steps, width, first_allowed=None, start_ban=None, ends=None):
        # The slot of the token the head was given: the context's last token first (the
        # canvas's first guess, from the context's own hidden state: slot -1), then the first
        # match after the last one seen.
        at = -1 if not seen else next(i for i in range(seen[-1] + 1, len(truth)) if truth[i] == int(tokens[0]))
        seen.append(at)
        guess = truth[at + 1:at + 1 + steps]
        guess = guess + [0] * (steps - len(guess))
        return draft_head.HeadGuesses(torch.tensor([[guess] * width]), torch.ones(1, width))

    monkeypatch.setattr(draft_head.DraftHead, "guess_chains", oracle)
    on = engine_for(tiny_shifted_model, draft_head=str(head_dir), draft_tokens=3)
    try:
        res = on.infill(InfillRequest(holes=[HOLES[0]])).holes[0]
    finally:
        on.shutdown()
    assert res.text == plain.text
    # the first pass checks a guess from the context; after it (3 guessed tokens and the
    # model's next), the head starts from slot 3's token
    assert seen[:2] == [-1, 3]
    assert res.passes <= (plain.passes + 3) // 4 + 1, (res.passes, plain.passes)


@pytest.mark.skipif(not int4_available(), reason="this torch has no CPU weight-only kernels")
def test_a_weight_only_head_guesses_as_its_fp32_weights_do(tiny_shifted_model):
    """weight_only(): the head's projections and vocabulary rows run through the int8 kernel
    (per-row scales) on an engine whose base does: its logits stay within the int8 rounding of
    the fp32 head's, and so do nearly all its guesses (they are only drafts: the base checks each)."""
    from dllm_engine.weight_only import Int8RowLinear

    loaded = load(str(tiny_shifted_model))
    fp32 = random_head(loaded.model, scale=0.1, vocab=64)
    quant = random_head(loaded.model, scale=0.1, vocab=64)
    quant.weight_only()
    assert isinstance(quant.readout, Int8RowLinear) and isinstance(quant.blocks[0].gate_up, Int8RowLinear)
    torch.manual_seed(1)
    hidden, tokens = torch.randn(64, loaded.config.hidden_size), torch.randint(0, 64, (64,))
    exact = fp32.logits(fp32.step(hidden, tokens))
    near = quant.logits(quant.step(hidden, tokens))
    assert near.dtype == torch.float32 and near.shape == exact.shape
    assert (near - exact).abs().max() <= 0.05 * exact.abs().max()
    same = (quant.guess(hidden, tokens, 3) == fp32.guess(hidden, tokens, 3)).float().mean()
    assert same >= 0.9, same


def test_an_engine_quantizes_its_head_only_with_weight_only_weights(tiny_shifted_model, head_dir):
    """The head follows the base: weight-only kernels where the base runs them (a CPU's
    "auto", int4 or int8), its own fp32 weights where the base runs native weights."""
    native = engine_for(tiny_shifted_model, draft_head=str(head_dir), weights="native")
    try:
        assert native.draft_head is not None and native.draft_head.readout is None
    finally:
        native.shutdown()
    if not int4_available():
        return  # (no CPU weight-only kernels in this torch: "auto" keeps native weights)
    int4 = engine_for(tiny_shifted_model, draft_head=str(head_dir), weights="int4")
    try:
        assert int4.weights == "int4" and int4.draft_head.readout is not None
        res = int4.infill(InfillRequest(holes=[HOLES[0]])).holes[0]
        assert res.tokens > 0 and res.finish_reason in ("end", "max_tokens")
    finally:
        int4.shutdown()


def test_attach_refuses_what_does_not_fit(tiny_shifted_model, tmp_path):
    loaded = load(str(tiny_shifted_model))
    assert draft_head.attach(loaded, "none") is None
    assert draft_head.attach(loaded, "shipped") is None  # a folder model names no base: nothing shipped
    with pytest.raises(CheckpointError, match="no draft_head.json"):
        draft_head.attach(loaded, str(tmp_path))
    other = draft_head.DraftHead(draft_head.DraftHeadConfig(hidden_size=16, vocab=4), torch.zeros(10, 16),
                                 torch.arange(4))
    other.save(tmp_path / "other")
    with pytest.raises(CheckpointError, match="does not fit"):
        draft_head.attach(loaded, str(tmp_path / "other"))


def test_code_vocabulary_keeps_the_most_frequent_and_the_named():
    counts = torch.tensor([5, 0, 9, 1, 7, 0])
    assert draft_head.code_vocabulary(counts, 3).tolist() == [0, 2, 4]
    assert draft_head.code_vocabulary(counts, 3, always=[5]).tolist() == [2, 4, 5]


def held(run: Path, field: str) -> list[float]:
    with (run / "loss.csv").open() as f:
        return [float(r[field]) for r in csv.DictReader(f) if r["split"] == "heldout"]


def test_training_raises_the_held_out_agreement_and_resumes(tmp_path):
    from dllm_engine.training import draft_head as trainer

    torch.manual_seed(0)
    run = tmp_path / "run"
    common = ["--model", "small", "--run", str(run), "--corpus", str(ROOT / "engine" / "dllm_engine"),
              "--steps", "2", "--inner", "64", "--blocks", "1", "--vocab", "512", "--lr", "3e-3", "--warmup", "2",
              "--tail", "48", "--prefix-max", "96", "--suffix-max", "32", "--held", "4", "--log-every", "5",
              "--eval-every", "1000"]
    trainer.main([*common, "--max-steps", "25", "--minutes", "5"])
    losses = held(run, "loss")
    assert losses[-1] < 0.9 * losses[0]
    assert held(run, "agree_1")[-1] > held(run, "agree_1")[0]
    saved = draft_head.DraftHeadConfig.load(run / "head" / "draft_head.json")
    assert (saved.steps, saved.vocab, saved.trained["steps"]) == (2, 512, 25)
    trainer.main([*common, "--max-steps", "27", "--minutes", "5"])
    resumed = draft_head.DraftHeadConfig.load(run / "head" / "draft_head.json")
    assert resumed.trained["steps"] == 27
    assert len(held(run, "loss")) == len(losses) + 1  # no second step-0 evaluation: the run went on


def test_the_head_trains_from_sampling_processes(tmp_path):
    """--workers (the sampling pool the draft rows' trainer shares): batches cut in spawned
    processes, as on a GPU; the run trains, logs and saves as without them."""
    from dllm_engine.training import draft_head as trainer

    run = tmp_path / "run"
    trainer.main(["--model", "small", "--run", str(run), "--corpus", str(ROOT / "engine" / "dllm_engine"),
                  "--steps", "2", "--inner", "32", "--blocks", "1", "--vocab", "256", "--tail", "16",
                  "--prefix-max", "64", "--suffix-max", "16", "--held", "2", "--log-every", "1",
                  "--eval-every", "1000", "--max-steps", "3", "--workers", "1", "--batch", "3", "--device", "auto"])
    with (run / "loss.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["step"] for r in rows if r["split"] == "train"] == ["1", "2", "3"]
    assert float(rows[1]["anchors_per_s"]) > 0
    saved = draft_head.DraftHeadConfig.load(run / "head" / "draft_head.json")
    assert saved.trained["steps"] == 3 and saved.trained["device"] == "cpu" and saved.trained["batch"] == 3


def _attention_adapter(folder: Path, rank: int = 4) -> Path:
    """A base adapter (low_rank.py's folder) for the small model, random on q/k/v/o."""
    import json

    from safetensors.torch import save_file

    model = load("small", dtype=torch.float32).model
    gen = torch.Generator().manual_seed(1)
    tensors = {}
    for i, layer in enumerate(model.model.layers):
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            out_f, in_f = getattr(layer.self_attn, name).weight.shape
            tensors[f"model.layers.{i}.self_attn.{name}.lora_a"] = torch.randn(rank, in_f, generator=gen) * 0.3
            tensors[f"model.layers.{i}.self_attn.{name}.lora_b"] = torch.randn(out_f, rank, generator=gen) * 0.3
    folder.mkdir()
    save_file(tensors, str(folder / "lora.safetensors"))
    (folder / "lora.json").write_text(json.dumps({"rank": rank, "alpha": rank, "targets": ["q_proj", "k_proj",
                                                                                          "v_proj", "o_proj"]}))
    return folder


def test_a_head_refits_from_a_given_head_to_the_teacher_with_its_adapter(tmp_path):
    """--init starts a run from a trained head (refitting the shipped head on a CPU), and
    --base-adapter makes the teacher the model as the engine runs it: the same head, held
    set and bare teacher give back the first run's last figures; the adapted teacher others."""
    from dllm_engine.training import draft_head as trainer

    common = ["--model", "small", "--corpus", str(ROOT / "engine" / "dllm_engine"), "--steps", "2", "--inner", "32",
              "--blocks", "1", "--vocab", "256", "--tail", "24", "--prefix-max", "64", "--suffix-max", "16",
              "--held", "2", "--eval-every", "1000", "--minutes", "5"]
    trainer.main([*common, "--run", str(tmp_path / "first"), "--base-adapter", "none", "--max-steps", "3"])
    first = held(tmp_path / "first", "loss")[-1]
    init = ["--init", str(tmp_path / "first" / "head"), "--max-steps", "0"]
    trainer.main([*common, "--run", str(tmp_path / "bare"), "--base-adapter", "none", *init])
    bare = held(tmp_path / "bare", "loss")[0]
    assert bare == pytest.approx(first, abs=1e-3)  # (the head is saved in bf16)
    adapter = _attention_adapter(tmp_path / "adapter")
    trainer.main([*common, "--run", str(tmp_path / "adapted"), "--base-adapter", str(adapter), *init])
    adapted = held(tmp_path / "adapted", "loss")[0]
    assert abs(adapted - first) > 0.05
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="no draft head"):
        trainer.main([*common, "--run", str(tmp_path / "none"), "--init", str(tmp_path / "empty")])
