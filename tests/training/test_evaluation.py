"""The evaluation harness scores known-correct and known-wrong fills correctly, in subprocesses."""

from __future__ import annotations

import asyncio

import pytest

from dllm_engine.evaluation import execution
from dllm_engine.evaluation.harness import Arm, ContextTrimmer, evaluate
from dllm_engine.evaluation.report import markdown, summarize
from dllm_engine.evaluation.tasks import DEFAULT_DATA_DIR, Task, cut_heldout, load_humaneval
from dllm_engine.protocol import HoleResult, InfillResult

needs_data = pytest.mark.skipif(not DEFAULT_DATA_DIR.exists(), reason="HumanEval infilling data not on this machine")


@needs_data
def test_canonical_fills_pass_and_wrong_fills_fail():
    tasks = [t for t in load_humaneval("single-line", stride=7) if t.middle.strip().startswith("return ")][:3]
    assert len(tasks) == 3 and all(t.executable for t in tasks)
    good = execution.run_programs([t.program(t.middle) for t in tasks], timeout_s=20)
    assert [r.status for r in good] == ["passed"] * 3
    indent = [t.middle[:len(t.middle) - len(t.middle.lstrip())] for t in tasks]
    wrong = execution.run_programs([t.program(ind + "return None\n") for t, ind in zip(tasks, indent)], timeout_s=20)
    assert all(r.status == "failed" for r in wrong), [r.status for r in wrong]
    broken = execution.run_programs([tasks[0].program(indent[0] + "return (\n")], timeout_s=20)
    assert broken[0].status == "syntax_error" and not broken[0].syntax_ok


def test_runner_times_out_and_never_runs_code_in_process(tmp_path):
    marker = tmp_path / "ran"
    src = f"open({str(marker)!r}, 'w').write('x')\nwhile True:\n    pass\n"
    assert execution.run_program(src, timeout_s=1.0).status == "timeout"
    assert marker.exists()  # it ran, in a child process that the timeout killed
    assert execution.syntax_ok(["x = 1\n", "def f(:\n"]) == [True, False]


class FakeClient:
    """Answers each hole with a scripted fill (no model): isolates the harness's scoring."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers

    async def infill(self, request, on_event=None):
        hole = request.holes[0]
        text = self.answers.get(hole.prefix[-40:], "")
        return InfillResult(request_id=request.request_id, model="fake", elapsed_ms=1.0,
                            holes=[HoleResult(text=text, finish_reason="end", passes=2, tokens=4,
                                              committed_per_pass=[3, 1])])

    async def close(self):
        pass


@needs_data
def test_harness_scores_arms_and_reports():
    tasks = load_humaneval("single-line", limit=2, stride=100)
    client = FakeClient({t.prefix[-40:]: t.middle for t in tasks[:1]})  # right on task 0, empty on task 1
    arms = [Arm("empty", empty=True), Arm("model", threshold=0.9)]
    outcomes = asyncio.run(evaluate(client, tasks, arms, ContextTrimmer(None, None), {"single-line": 64}))
    rows = {r["arm"]: r for r in summarize(outcomes)}
    assert rows["model"]["pass@1"] == 50.0 and rows["model"]["exact_match"] == 50.0
    assert rows["model"]["passes_per_infill"] == 2 and rows["model"]["tokens_per_pass"] == 2.0
    assert rows["empty"]["exact_match"] == 0.0 and rows["empty"]["passes_per_infill"] is None
    assert "| single-line | model | 2 | 50.0 |" in markdown(summarize(outcomes))


def test_heldout_cut_is_deterministic_and_scored_by_exact_match_and_syntax(tmp_path):
    src = tmp_path / "mod.py"
    src.write_text("".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(20)))
    sources = [(str(src), src.read_text())]
    a, b = cut_heldout(sources, 9, seed=1), cut_heldout(sources, 9, seed=1)
    assert a == b and {t.benchmark for t in a} == {"heldout-line", "heldout-lines", "heldout-span"}
    for t in a:
        assert t.prefix + t.middle + t.suffix == src.read_text()
    task = a[0]
    client = FakeClient({task.prefix[-40:]: task.middle})
    outcomes = asyncio.run(evaluate(client, [task], [Arm("m")], ContextTrimmer(None, None), {}))
    assert outcomes[0].exact and outcomes[0].syntax_ok and outcomes[0].passed is None


def test_heldout_holes_are_distinct_and_files_with_one_name_in_two_folders_keep_their_own_ids(tmp_path):
    """Comparisons pair outcomes by task id and rates count each hole: no hole is drawn twice (8 of
    600 of dllm_lsp/'s were), and two `mod.py` under different folders do not share ids."""
    text = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(20))
    tasks = cut_heldout([("a/mod.py", text), ("b/mod.py", text)], 60, seed=0)
    ids = [t.task_id for t in tasks]
    assert len(set(ids)) == len(ids)
    assert {i.split(":")[0] for i in ids} == {"a/mod.py", "b/mod.py"}
    with pytest.raises(ValueError, match="distinct held-out holes"):
        cut_heldout([("a/mod.py", text)], 10_000, seed=0)


def test_one_heldout_kind_alone_is_that_kinds_share_of_the_same_holes(tmp_path):
    """`--benchmarks heldout-span`: the spans of a whole held-out run, no other holes, so two
    runs of one kind pair with each other and with a whole run's."""
    from argparse import Namespace

    from dllm_engine.evaluation.run import collect_tasks

    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "mod.py").write_text("".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(20)))
    args = Namespace(benchmarks="heldout", heldout_dir=str(folder), heldout_count=12, seed=0,
                     manifest=None, heldout_data=None)
    whole = collect_tasks(args)
    spans = collect_tasks(Namespace(**{**vars(args), "benchmarks": "heldout-span"}))
    assert spans == [t for t in whole if t.benchmark == "heldout-span"] and len(spans) == 4
    both = collect_tasks(Namespace(**{**vars(args), "benchmarks": "heldout-line,heldout-span"}))
    assert {t.benchmark for t in both} == {"heldout-line", "heldout-span"} and len(both) == 8


def test_trimmer_keeps_the_text_next_to_the_hole(tokenizer):
    trim = ContextTrimmer(tokenizer, 20)
    prefix = "".join(f"a{i} = {i}\n" for i in range(50))
    suffix = "".join(f"b{i} = {i}\n" for i in range(50))
    p, s = trim(prefix, suffix)
    assert prefix.endswith(p) and suffix.startswith(s)
    assert len(tokenizer.encode(p)) + len(tokenizer.encode(s)) <= 18 and len(p) > len(s) > 0


def test_heldout_texts_from_token_files_match_the_files(tiny_data):
    import json

    from dllm_engine.evaluation.tasks import heldout_sources

    decoded = heldout_sources(token_dir=tiny_data / "heldout")
    names = json.loads((tiny_data / "manifest.json").read_text())["heldout"]
    assert [n for n, _ in decoded] == names
    assert all(text == open(name).read() for name, text in decoded)


@needs_data
def test_real_engine_on_a_freshly_trained_checkpoint(tiny_data, tmp_path):
    """End to end: train a tiny model, then evaluate it through the in-process engine (oracle and variable)."""
    from dllm_engine.checkpoint import SMALL_MODEL_DIR
    from dllm_engine.clients import InProcessClient
    from dllm_engine.tokenizer import TextTokenizer
    from dllm_engine.training.batches import StreamConfig
    from dllm_engine.training.trainer import Trainer, TrainConfig

    tiny = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 64}
    Trainer(TrainConfig(out_dir=tmp_path / "run", data_dir=tiny_data / "train", heldout_dir=tiny_data / "heldout",
                        tokenizer=SMALL_MODEL_DIR / "tokenizer.json", model=tiny, max_steps=2, eval_every=2,
                        eval_batches=1, stream=StreamConfig(batch_size=2, context_budget=32))).run(on_log=lambda r: None)
    tasks = load_humaneval("single-line", limit=2, stride=300)
    trim = ContextTrimmer(TextTokenizer(SMALL_MODEL_DIR / "tokenizer.json"), 96)
    client = InProcessClient(model=str(tmp_path / "run" / "best"), threads=1)
    arms = [Arm("oracle", oracle_length=True, threshold=1.0), Arm("variable", threshold=0.9)]

    async def go():
        try:
            return await evaluate(client, tasks, arms, trim, {"single-line": 16})
        finally:
            await client.close()

    outcomes = asyncio.run(go())
    for o, t in zip([o for o in outcomes if o.arm == "oracle"], tasks):
        n = trim.count(t.middle)  # one token per pass over a canvas of the true length (a pad may end it early)
        assert 1 <= o.passes <= n and o.tokens <= n
        assert o.passed is not None and o.syntax_ok is not None and o.latency_ms > 0
    assert all(1 <= o.passes <= 16 for o in outcomes if o.arm == "variable")


class RecordingClient(FakeClient):
    """Like FakeClient, and keeps every hole it was asked to fill."""

    def __init__(self, answers: dict[str, str]) -> None:
        super().__init__(answers)
        self.holes = []

    async def infill(self, request, on_event=None):
        self.holes.append(request.holes[0])
        return await super().infill(request, on_event)


def test_line_mode_arm_stops_at_newline_and_runs_only_on_single_line_holes():
    line = Task(task_id="a", benchmark="heldout-line", prefix="def f(x):\n", middle="    return x\n", suffix="")
    multi = Task(task_id="b", benchmark="heldout-lines", prefix="def g(x):\n", middle="    y = x\n    return y\n",
                 suffix="")
    client = RecordingClient({line.prefix[-40:]: "    return x"})  # the engine cuts the fill at the stop newline
    outcomes = asyncio.run(evaluate(client, [line, multi], [Arm("line", line=True)], ContextTrimmer(None, None), {}))
    assert [o.task_id for o in outcomes] == ["a"]  # no line-mode fill for a multi-line hole
    assert client.holes[0].stop == ("\n",)
    assert outcomes[0].fill == "    return x\n" and outcomes[0].exact
