"""Best of N on the shipped default model, on the holes of examples/holes/. The fill kept must leave a file that compiles, and never
score below the plain fill (the model's own left-to-right reading with the next lines)."""

import sys
from pathlib import Path

import pytest

from dllm_engine.candidate_scoring import score_fills
from dllm_engine.protocol import DiffusionParams, Hole, InfillRequest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
from check_holes import HOLES, cut  # noqa: E402


@pytest.mark.parametrize("name", sorted(p.name for p in HOLES.glob("*.py")))
def test_the_kept_fill_reads_with_the_suffix(base_engine, name):
    prefix, _, suffix = cut((HOLES / name).read_text())
    hole = Hole(prefix=prefix, suffix=suffix, max_tokens=48, stop=("\n",))
    plain = base_engine.infill(InfillRequest(holes=[hole]), timeout=120).holes[0].text
    best = base_engine.infill(InfillRequest(holes=[hole], params=DiffusionParams(candidates=4)), timeout=120).holes[0].text
    compile(prefix + best + suffix, name, "exec")  # a block opener before a dedent, say, would not
    with base_engine._runner_lock:
        mine, theirs = score_fills(base_engine, prefix, suffix, [best, plain])
    assert mine >= theirs - 1e-3
