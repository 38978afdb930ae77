"""Recipe validation (built-in and TOML) and where each built-in recipe cuts holes, per language."""

from __future__ import annotations

import pytest

from dllm_lsp.refactor.builtin_recipes import BUILTIN_NAMES, builtin_recipe, regenerate_recipe
from dllm_lsp.refactor.planner import plan_file
from dllm_lsp.refactor.recipes import RecipeError, load_recipe_file, recipe_from_dict
from dllm_lsp.refactor.sites import QueryProblem, compiled_query, find_sites
from dllm_lsp.syntax.languages import language_named, parse

from .conftest import FIXTURE_REPO


@pytest.mark.parametrize("name", [n for n in BUILTIN_NAMES if n != "regenerate"])
def test_builtin_queries_compile_for_every_language_they_name(name):
    recipe = builtin_recipe(name)
    for rule in recipe.rules:
        for lang in rule.languages:
            if rule.query is not None:
                compiled_query(rule.query, language_named(lang), rule.template)


def _holes(path: str, recipe_name: str, **kw) -> list[str]:
    plan = plan_file(str(FIXTURE_REPO / path), builtin_recipe(recipe_name, **kw))
    assert not hasattr(plan, "reason"), plan
    return [plan.text[h.start : h.end] for h in plan.holes]


def test_fill_bodies_finds_the_placeholders_of_each_language():
    assert _holes("pkg/geometry.py", "fill-bodies") == ["pass", "...", "raise NotImplementedError"]
    assert _holes("web/cart.js", "fill-bodies") == ["\n  ", 'throw new Error("not implemented");']  # `noop = () => {}` kept
    assert _holes("gosrc/mathx.go", "fill-bodies") == ["\n", 'panic("not implemented")']
    assert _holes("rs/lib.rs", "fill-bodies") == ["todo!()", "unimplemented!();"]  # `done` has a body


def test_markers_and_python_recipes():
    assert _holes("pkg/notes.py", "fill-markers") == ["<FILL>"]
    assert _holes("pkg/notes.py", "fill-markers", marker="value") == ["value", "value"]
    src = "def f(a, b=2, *args):\n    # dllm: fill\n    return a\n"
    py = language_named("python")
    sites = find_sites(src, parse(src, py), builtin_recipe("fill-markers"), py)
    assert [src[s.start : s.end] for s in sites] == ["# dllm: fill"]
    hints = find_sites(src, parse(src, py), builtin_recipe("add-type-hints"), py)
    assert [(src[s.start : s.end], s.before, s.after) for s in hints] == [("", ": ", ""), ("b=2", "b: ", " = 2")]
    ret = find_sites(src, parse(src, py), builtin_recipe("add-return-types"), py)
    assert [(s.start, s.before) for s in ret] == [(src.index(":"), " -> ")]
    docs = find_sites(src, parse(src, py), builtin_recipe("add-docstrings"), py)
    assert [(s.before, s.after) for s in docs] == [('"""', '"""\n    ')]


def test_methods_with_self_get_hints_only_on_other_parameters():
    src = "class A:\n    def m(self, x):\n        '''doc'''\n        return x\n"
    py = language_named("python")
    hints = find_sites(src, parse(src, py), builtin_recipe("add-type-hints"), py)
    assert [src[s.start - 1] for s in hints] == ["x"]
    assert find_sites(src, parse(src, py), builtin_recipe("add-docstrings"), py)[0].start == src.index("def")


def test_filled_holes_no_longer_match(tmp_path):
    """Idempotence is what makes an interrupted run resumable."""
    path = tmp_path / "m.py"
    path.write_text("def f():\n    return 1\n\n\ndef g():\n    pass\n")
    assert len(plan_file(str(path), builtin_recipe("fill-bodies")).holes) == 1
    path.write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    assert plan_file(str(path), builtin_recipe("fill-bodies")).holes == ()


def test_regenerate_and_user_toml_recipe(tmp_path):
    src = "def f(x):\n    assert x > 0\n    return x\n"
    py = language_named("python")
    recipe = regenerate_recipe("(assert_statement) @hole", languages=["python"], max_tokens=12)
    (site,) = find_sites(src, parse(src, py), recipe, py)
    assert src[site.start : site.end] == "assert x > 0" and site.max_tokens == 12
    toml = tmp_path / "r.toml"
    toml.write_text('name = "returns"\nmax_tokens = 16\n[[rule]]\nlanguages = ["python"]\n'
                    "query = '(return_statement (_) @value)'\ncapture = \"value\"\nkind = \"line\"\n")
    user = load_recipe_file(toml)
    (site,) = find_sites(src, parse(src, py), user, py)
    assert src[site.start : site.end] == "x" and site.kind == "line" and site.max_tokens == 16


@pytest.mark.parametrize(
    "table, message",
    [
        ({"name": "x", "rule": []}, "at least one"),
        ({"name": "x", "rule": [{"languages": ["python"]}]}, "exactly one of"),
        ({"name": "x", "rule": [{"languages": ["cobol"], "query": "(x) @hole"}]}, "unknown language 'cobol'"),
        ({"name": "x", "rule": [{"languages": ["python"], "query": "(x) @other"}]}, "never captures @hole"),
        ({"name": "x", "rule": [{"languages": ["python"], "query": "(x) @hole", "action": "zap"}]}, "action"),
        ({"name": "x", "rule": [{"languages": ["python"], "query": "(x) @hole", "template": "no hole"}]}, "${hole}"),
        ({"name": "x", "max_tokens": 0, "rule": [{"languages": ["python"], "query": "(x) @hole"}]}, "max_tokens"),
        ({"name": "x", "rule": [{"languages": ["python"], "query": "(x) @hole", "qurey": 1}]}, "unknown keys"),
        ({"name": "x", "rule": [{"languages": "*", "pattern": "<F>", "template": "${x}${hole}"}]}, "pattern"),
    ],
)
def test_invalid_recipes_say_what_is_wrong(table, message):
    with pytest.raises(RecipeError, match=message.replace("$", r"\$").replace("{", r"\{").replace("}", r"\}")):
        recipe_from_dict(table, "test.toml")


def test_bad_toml_and_bad_query_are_reported(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \n")
    with pytest.raises(RecipeError, match="not valid TOML"):
        load_recipe_file(bad)
    with pytest.raises(RecipeError, match="cannot read"):
        load_recipe_file(tmp_path / "missing.toml")
    recipe = regenerate_recipe("(no_such_node) @hole", languages=["python"])
    py_file = tmp_path / "a.py"
    py_file.write_text("x = 1\n")
    skipped = plan_file(str(py_file), recipe)
    assert "does not compile for python" in skipped.reason
    with pytest.raises(QueryProblem, match=r"\$\{value\}"):
        compiled_query("(identifier) @hole", language_named("python"), "${value}${hole}")


def test_example_recipe_file_loads_and_matches(tmp_path):
    from .conftest import ROOT

    recipe = load_recipe_file(ROOT / "examples" / "recipes" / "fill-asserts.toml")
    src = "def f(x):\n    assert x > 0\n    if not x:\n        raise ValueError()\n    return x\n"
    py = language_named("python")
    sites = find_sites(src, parse(src, py), recipe, py)
    assert [(src[s.start : s.end], s.before, s.after) for s in sites] == [("x > 0", "", ""), ("()", '("', '")')]


def test_refactor_modules_import_without_torch():
    import subprocess
    import sys

    code = ("import sys, dllm_lsp.commands.refactor, dllm_lsp.refactor.runner, dllm_lsp.refactor.session, "
            "dllm_lsp.refactor.report, dllm_lsp.refactor.ray_shard\n"
            "bad = [m for m in ('torch', 'triton', 'ray') if m in sys.modules]\nassert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
