"""Import walls: dllm_lsp never imports torch/triton; the engine never imports pygls/tree-sitter;
kernels import only torch and triton (plus the standard library)."""

import ast
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


def test_no_top_level_package_shadows_common_names():
    # A top-level `kernels` or `engine` import name would shadow Hugging Face's `kernels`.
    out = subprocess.run([sys.executable, "-c", "import importlib.util as u; print(u.find_spec('kernels'))"],
                         capture_output=True, text=True, cwd="/")
    assert "dllm" not in out.stdout and "/work" not in out.stdout


def test_server_side_modules_load_without_torch():
    code = ("import sys, dllm_lsp, dllm_lsp.cli, dllm_engine.protocol, dllm_engine.clients\n"
            "dllm_lsp.cli.build_parser()\n"
            "bad = [m for m in ('torch', 'triton') if m in sys.modules]\n"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd="/")
