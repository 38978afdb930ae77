"""`dllm.fillHoles` on an open buffer, with the refactor command's own recipes.

The placeholders are those of `dllm-lsp refactor --recipe fill-bodies` and
`--recipe fill-markers` (the marker is the server's `fillMarker`): `pass`,
`...`, `raise NotImplementedError`, `todo!()`, `panic("TODO")`, `throw new
Error("not implemented")`, `{ // TODO }` bodies, marker lines and `dllm: fill`
comments. Sites, hole contexts, shaping and the parse check come from
`dllm_lsp.refactor` and the syntax layer, so the editor and the batch command
fill the same holes the same way; only the text comes from the buffer, not disk.
"""

from __future__ import annotations

import difflib
import logging
from dataclasses import replace

from lsprotocol import types

from ..refactor.apply import HoleFill, build_edit
from ..refactor.builtin_recipes import builtin_recipe
from ..refactor.planner import FilePlan, FileSignature, PlannedHole
from ..refactor.sites import QueryProblem, find_sites
from ..syntax.context import range_context
from .conversions import Encoding, LineIndex
from .documents import Document
from .infill import budget, syntax_tree
from .options import ServerOptions

log = logging.getLogger(__name__)

RECIPES = ("fill-bodies", "fill-markers")
MAX_HOLES = 64


def plan_placeholders(doc: Document, options: ServerOptions) -> FilePlan | None:
    """The buffer's placeholders as a refactor plan (None: unknown language or nothing to fill)."""
    language = doc.syntax_language
    if language is None:
        log.info("fillHoles: no grammar for %s", doc.uri)
        return None
    tree = syntax_tree(doc)
    sites = []
    for name in RECIPES:
        recipe = builtin_recipe(name, options.fill_marker)
        if language.name not in recipe.languages:
            continue
        try:
            sites += find_sites(doc.text, tree, recipe, language)
        except QueryProblem as exc:
            log.error("fillHoles: recipe %s cannot run on %s: %s", name, language.name, exc)
    kept = []
    for site in sorted(sites, key=lambda s: (s.start, s.end)):
        if not kept or site.start >= kept[-1].end:  # a marker inside a body placeholder: keep the first
            kept.append(site)
    holes = []
    for site in kept[:MAX_HOLES]:
        hole = PlannedHole(site.start, site.end, site.before, site.after, (0, 0, 0, 0), ctx=None)  # type: ignore[arg-type]
        opened, offset = hole.opened_document(doc.text)
        ctx = range_context(opened, offset, offset, language, budget(options))
        max_tokens = min(1024, site.max_tokens)
        bucket = ctx.bucket if ctx.bucket is not None and ctx.bucket <= max_tokens else None
        holes.append(replace(hole, ctx=replace(ctx, kind=site.kind or ctx.kind, max_tokens=max_tokens, bucket=bucket)))
    if not holes:
        return None
    return FilePlan(doc.uri, doc.text, "utf-8", language.name, FileSignature(0, 0, ""), tuple(holes))


def apply_fills(plan: FilePlan, fills: list[HoleFill | None]) -> tuple[str, int]:
    """The new buffer text and how many holes were filled (shaped, parse-checked)."""
    new_text, outcomes = build_edit(plan, fills)
    for outcome in outcomes:
        if not outcome.applied:
            log.info("fillHoles: hole at %d not filled: %s", outcome.hole.start, outcome.reason)
    return new_text, sum(o.applied for o in outcomes)


def line_edits(old: str, new: str, encoding: Encoding) -> list[types.TextEdit]:
    """Minimal whole-line edits turning `old` into `new` (one per changed run of lines)."""
    index = LineIndex(old)
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    starts = [0]
    for line in old_lines:
        starts.append(starts[-1] + len(line))
    edits = []
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            edits.append(types.TextEdit(range=index.range(starts[i1], starts[i2], encoding),
                                        new_text="".join(new_lines[j1:j2])))
    return edits
