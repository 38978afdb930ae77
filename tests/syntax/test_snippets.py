"""Cross-file snippets: definitions of imported names from other open documents."""

from __future__ import annotations

from dllm_lsp.syntax.context import ContextBudget, completion_context, with_snippets
from dllm_lsp.syntax.languages import language_named

PY_UTILS = '''import math


def helper(a, b):
    """Add two numbers."""
    return a + b


def unrelated():
    return 0


class Shape:
    def area(self):
        return math.pi
'''


def _ctx(text, language, docs, **budget):
    """The context with snippets asked for (they are off by default: server/options.py)."""
    budget = {"snippet_tokens": 256, **budget}
    return completion_context(text, len(text), language_named(language), ContextBudget(**budget), open_documents=docs)


def test_snippets_are_off_by_default():
    text = "from utils import helper, Shape\n\n\ndef f(x):\n    "
    ctx = completion_context(text, len(text), language_named("python"), ContextBudget(),
                             open_documents={"file:///w/utils.py": PY_UTILS})
    assert ctx.snippets == () and with_snippets(ctx, language_named("python")) == ctx.prefix


def test_python_from_import_brings_the_definition():
    text = "from utils import helper, Shape\n\n\ndef f(x):\n    "
    ctx = _ctx(text, "python", {"file:///w/utils.py": PY_UTILS, "file:///w/main.py": text})
    assert len(ctx.snippets) == 2
    assert ctx.snippets[0].startswith("utils.py\ndef helper(a, b):")
    assert ctx.snippets[1].startswith("utils.py\nclass Shape:")
    assert not any("unrelated" in s for s in ctx.snippets)
    prompt = with_snippets(ctx, language_named("python"))
    assert prompt.startswith("# utils.py\n# def helper(a, b):\n")
    assert prompt.endswith(ctx.prefix)


def test_module_import_brings_the_definitions_that_are_used():
    text = "import utils\n\n\ndef f(x):\n    return utils.helper(x, 1) + "
    ctx = _ctx(text, "python", {"file:///w/utils.py": PY_UTILS})
    assert [s.split("\n")[1] for s in ctx.snippets] == ["def helper(a, b):"]


def test_javascript_named_import():
    text = 'import { formatPrice } from "./format.js";\n\nexport function show(p) {\n  '
    other = "export function formatPrice(p) {\n  return p.toFixed(2);\n}\n\nexport const other = 1;\n"
    ctx = _ctx(text, "javascript", {"file:///w/format.js": other})
    assert ctx.snippets == ("format.js\nfunction formatPrice(p) {\n  return p.toFixed(2);\n}",)
    assert with_snippets(ctx, language_named("javascript")).startswith("// format.js\n")


def test_c_include_brings_declarations_that_are_used():
    text = '#include "geometry.h"\n\nint main(void) {\n    return area('
    header = "int area(int w, int h);\nint perimeter(int w, int h);\n"
    ctx = _ctx(text, "c", {"file:///w/geometry.h": header})
    assert ctx.snippets == ("geometry.h\nint area(int w, int h);",)


def test_snippets_respect_the_character_budget():
    text = "from utils import helper, Shape\n\n\ndef f(x):\n    "
    ctx = _ctx(text, "python", {"file:///w/utils.py": PY_UTILS}, snippet_tokens=15, chars_per_token=3.2)
    assert sum(len(s) for s in ctx.snippets) <= 48


def test_snippets_respect_the_time_budget():
    text = "from utils import helper\n\n\ndef f(x):\n    "
    ctx = _ctx(text, "python", {"file:///w/utils.py": PY_UTILS}, snippet_time_s=0.0)
    assert ctx.snippets == ()


def test_long_definitions_are_shortened():
    body = "\n".join(f"    x{i} = {i}" for i in range(40))
    other = f"def big():\n{body}\n    return x0\n"
    text = "from big import big\n\nbig("
    (snippet,) = _ctx(text, "python", {"file:///w/big.py": other}).snippets
    assert snippet.count("\n") <= 9 and snippet.endswith("...")


def test_no_imports_no_snippets():
    text = "def f(x):\n    "
    assert _ctx(text, "python", {"file:///w/utils.py": PY_UTILS}).snippets == ()
    assert with_snippets(_ctx(text, "python", {}), language_named("python")) == text


def test_go_package_import_brings_used_functions():
    text = 'package main\n\nimport "example.com/shop/inventory"\n\nfunc main() {\n\tinv, _ := inventory.Load("x")\n\t'
    other = "package inventory\n\nfunc Load(path string) (*Inventory, error) {\n\treturn nil, nil\n}\n\nfunc Other() {}\n"
    (snippet,) = _ctx(text, "go", {"file:///w/inventory/inventory.go": other}).snippets
    assert snippet.startswith("inventory.go\nfunc Load(path string)")


def test_rust_use_brings_items():
    text = "use crate::geometry::{area, Point};\n\nfn main() {\n    let p = Point { x: 1 };\n    "
    other = "pub struct Point {\n    pub x: i32,\n}\n\npub fn area(p: &Point) -> i32 {\n    p.x\n}\n\nfn hidden() {}\n"
    snippets = _ctx(text, "rust", {"file:///w/src/geometry.rs": other}).snippets
    assert [s.split("\n")[1] for s in snippets] == ["pub struct Point {", "pub fn area(p: &Point) -> i32 {"]


def test_java_import_brings_the_class():
    text = "import shop.Item;\n\nclass Main {\n    void f() {\n        "
    other = "package shop;\n\npublic class Item {\n    public int price() { return 1; }\n}\n"
    (snippet,) = _ctx(text, "java", {"file:///w/shop/Item.java": other}).snippets
    assert snippet.startswith("Item.java\npublic class Item {")


def test_snippets_take_their_room_out_of_the_prefix_window():
    """The engine keeps the end of what it is sent within its budget and cuts the start: a full
    prefix window with snippets in front of it lost the snippets. They now fit inside the window."""
    body = "".join(f"    total_{i} = helper(total_{i - 1}, {i})\n" for i in range(1, 200))
    text = f"from utils import helper, Shape\n\n\ndef f(x):\n    total_0 = x\n{body}    "
    budget = dict(prefix_tokens=200, snippet_tokens=60)
    ctx = _ctx(text, "python", {"file:///w/utils.py": PY_UTILS}, **budget)
    bare = _ctx(text, "python", {}, **budget)
    window = ContextBudget().chars(200)
    assert ctx.snippets and window - 60 < len(bare.prefix) <= window  # the window is full without snippets
    prompt = with_snippets(ctx, language_named("python"))
    assert len(prompt) <= window
    assert len(ctx.prefix) < len(bare.prefix) and bare.prefix.endswith(ctx.prefix)
