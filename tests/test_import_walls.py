"""Import walls: dllm_lsp never imports torch/triton; the engine never imports pygls/tree-sitter;
kernels import only torch and triton (plus the standard library)."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STDLIB = set(sys.stdlib_module_names)


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def files(folder: str):
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", files("dllm_lsp"), ids=lambda p: str(p.relative_to(ROOT)))
def test_server_never_imports_torch(path):
    assert not imported_roots(path) & {"torch", "triton", "dllm_kernels"}


@pytest.mark.parametrize("path", files("engine/dllm_engine"), ids=lambda p: str(p.relative_to(ROOT)))
def test_engine_never_imports_the_server_side(path):
    assert not imported_roots(path) & {"pygls", "lsprotocol", "tree_sitter", "dllm_lsp"}


@pytest.mark.parametrize("path", files("kernels/dllm_kernels"), ids=lambda p: str(p.relative_to(ROOT)))
def test_kernels_import_only_torch_and_triton(path):
    assert imported_roots(path) - STDLIB <= {"torch", "triton", "dllm_kernels"}


@pytest.mark.parametrize("name", ["kernels", "engine"])
def test_no_top_level_package_shadows_common_names(name):
    # Our folders `kernels/` and `engine/` must never be importable under those names: a top-level
    # `kernels` would shadow Hugging Face's `kernels` (which transformers >= 5.25 installs). That
    # package may well be found, in site-packages; what must not be found is one of our folders.
    code = ("import importlib.util as u, json; s = u.find_spec(%r)\n"
            "print(json.dumps(None if s is None else [s.origin, list(s.submodule_search_locations or [])]))"
            % name)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", check=True)
    found = json.loads(out.stdout)
    if found is None:
        return
    origin, locations = found
    ours = (ROOT / name).resolve()
    for place in [origin, *locations]:
        if place and place not in ("namespace", "built-in", "frozen"):
            assert not Path(place).resolve().is_relative_to(ours), f"`import {name}` finds our folder: {place}"


def test_server_side_modules_load_without_torch():
    code = ("import sys, dllm_lsp, dllm_lsp.cli, dllm_engine.protocol, dllm_engine.clients\n"
            "dllm_lsp.cli.build_parser()\n"
            "bad = [m for m in ('torch', 'triton') if m in sys.modules]\n"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd="/")
