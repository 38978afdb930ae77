"""Run filled programs in subprocesses, never in this process.

Each program is written to a temporary file and run by `python -I` (isolated:
no user site, no environment paths) in its own temporary directory, with a
timeout, stdout/stderr discarded. A small driver first compiles the source so
a syntax error is told apart from a failing test:

    exit 0 passed, 1 failed (exception or assertion), 3 syntax error, timeout -> "timeout"

Syntax-only checks (held-out tasks, which have no tests) run many sources in
one subprocess that only calls `compile`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

DRIVER = r"""
import sys
path = sys.argv[1]
src = open(path, encoding="utf-8").read()
try:
    code = compile(src, path, "exec")
except (SyntaxError, ValueError):
    sys.exit(3)
import os, resource
try:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
except (ValueError, OSError):
    pass
try:
    exec(code, {"__name__": "__main__"})
except BaseException:
    sys.exit(1)
sys.exit(0)
"""

SYNTAX_DRIVER = r"""
import json, sys
out = []
for src in json.load(sys.stdin):
    try:
        compile(src, "<fill>", "exec")
        out.append(True)
    except (SyntaxError, ValueError):
        out.append(False)
json.dump(out, sys.stdout)
"""


@dataclass
class RunResult:
    status: str  # passed, failed, syntax_error, timeout

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def syntax_ok(self) -> bool:
        return self.status != "syntax_error"


def run_program(source: str, timeout_s: float = 10.0) -> RunResult:
    with tempfile.TemporaryDirectory(prefix="dllm-eval-") as tmp:
        prog = Path(tmp) / "program.py"
        prog.write_text(source, encoding="utf-8")
        driver = Path(tmp) / "driver.py"
        driver.write_text(DRIVER, encoding="utf-8")
        env = {"PATH": os.environ.get("PATH", ""), "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
        try:
            proc = subprocess.run([sys.executable, "-I", str(driver), str(prog)], cwd=tmp, env=env,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return RunResult("timeout")
    return RunResult({0: "passed", 3: "syntax_error"}.get(proc.returncode, "failed"))


def run_programs(sources: list[str], timeout_s: float = 10.0, workers: int | None = None) -> list[RunResult]:
    """Run every program, `workers` at a time (default: the number of cores)."""
    workers = workers or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=workers) as pool:  # threads only wait on subprocesses
        return list(pool.map(lambda s: run_program(s, timeout_s), sources))


def syntax_ok(sources: list[str], timeout_s: float = 60.0) -> list[bool]:
    """compile() each source in one subprocess; True where it parses."""
    if not sources:
        return []
    proc = subprocess.run([sys.executable, "-I", "-c", SYNTAX_DRIVER], input=json.dumps(sources),
                          capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"syntax checker failed: {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout)
