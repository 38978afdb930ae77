"""Fill the marked hole of each example in examples/holes/ with a model and run the example's
own checks on the result (the same check the original line passes).

    .venv/bin/python examples/check_holes.py [--model default] [--need 4] [--candidates 2]

Each example is a complete program whose hole line ends in `# <hole>`: the code after that
line's indentation is cut out (the cursor sits after the indentation, as in an editor), the
model fills it as a single line (stop at the newline; of best of N's fills, the first the file
parses with, as `dllm-lsp infill` prints), and the program's `__main__` asserts run in a
subprocess. Exit 0 when at least --need examples pass.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

HOLES = Path(__file__).parent / "holes"
MARK = "  # <hole>"


def cut(source: str) -> tuple[str, str, str]:
    """(prefix, original line's code, suffix) around the marked line."""
    lines = source.splitlines(keepends=True)
    i = next(n for n, line in enumerate(lines) if line.rstrip("\n").endswith(MARK))
    line = lines[i].rstrip("\n")[: -len(MARK)]
    indent = line[: len(line) - len(line.lstrip())]
    return "".join(lines[:i]) + indent, line.strip(), "\n" + "".join(lines[i + 1:])


def passes(program: str) -> bool:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(program)
    try:
        return subprocess.run([sys.executable, f.name], capture_output=True, timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False
    finally:
        Path(f.name).unlink()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--need", type=int, default=4, help="examples that must pass (of 6)")
    ap.add_argument("--weights", choices=("native", "int8"), default="native")
    ap.add_argument("--candidates", type=int, default=2,
                    help="best of N, as `dllm-lsp infill` asks (1: the plain fill, as typing gets)")
    args = ap.parse_args()
    from dllm_engine.engine import Engine, EngineConfig
    from dllm_engine.protocol import DiffusionParams, Hole, InfillRequest
    from dllm_lsp.commands.infill import parsing_first

    engine = Engine(EngineConfig(model=args.model, weights=args.weights))
    ok = 0
    try:
        for path in sorted(HOLES.glob("*.py")):
            prefix, original, suffix = cut(path.read_text())
            hole = Hole(prefix=prefix, suffix=suffix, max_tokens=48, stop=("\n",))
            res = engine.infill(InfillRequest(holes=[hole], params=DiffusionParams(candidates=args.candidates))).holes[0]
            res = parsing_first(res, prefix, suffix, path)  # of best of N's fills, as `dllm-lsp infill` prints
            good = passes(prefix + res.text + suffix)
            ok += good
            print(f"{'PASS' if good else 'FAIL'}  {path.name:24} {res.text!r}  (original {original!r}; "
                  f"{res.tokens} tokens, {res.passes} passes)")
    finally:
        engine.shutdown()
    total = len(list(HOLES.glob("*.py")))
    print(f"{ok}/{total} examples pass with model {args.model!r} (need {args.need})")
    return 0 if ok >= args.need else 1


if __name__ == "__main__":
    sys.exit(main())
