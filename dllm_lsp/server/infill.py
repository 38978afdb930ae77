"""From a document and a cursor to an engine request, and from the engine's text to an edit.

The pure work (what kind of completion fits here, the context windows, output
shaping, parse checks) lives in `dllm_lsp.syntax`; this module only binds it
to the server's documents and options and to the engine protocol.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from dllm_engine.protocol import DiffusionParams, Hole, HoleResult, InfillRequest

from ..syntax.context import (CompletionContext, ContextBudget, completion_context, opening_bans, range_context,
                              resting_context, under_policy, with_snippets)
from ..syntax.fill_choice import Original, fewest_errors
from ..syntax.indentation import leading
from ..syntax.text_lines import previous_nonblank_line
from ..syntax.shaping import shape_completion
from .documents import Document
from .options import ServerOptions

log = logging.getLogger(__name__)

# tsx shares the TypeScript switch; c++ is "cpp" in the options.
_SWITCH_NAMES = {"tsx": "typescript"}


@dataclass(frozen=True)
class Plan:
    """A completion to ask the engine for at `offset` of a snapshot of the document."""

    uri: str
    version: int
    text: str
    offset: int
    ctx: CompletionContext
    language: Any
    tree: Any
    hole: Hole


@dataclass(frozen=True)
class Suggestion:
    text: str  # to insert at `offset`
    offset: int
    replace_end: int  # the insertion replaces text[offset:replace_end]
    # Best of N's other fills at the same place (an explicit request), each shaped as any fill.
    others: tuple["Suggestion", ...] = ()


def language_enabled(doc: Document, options: ServerOptions) -> bool:
    if doc.language is None:
        return True  # unknown languages get line-based context
    name = _SWITCH_NAMES.get(doc.language.name, doc.language.name)
    return options.languages.get(name, True)


def budget(options: ServerOptions) -> ContextBudget:
    c = options.context
    return ContextBudget(prefix_tokens=c.prefix_tokens, suffix_tokens=c.suffix_tokens, snippet_tokens=c.snippet_tokens)


def params(options: ServerOptions, invoked: bool = False) -> DiffusionParams:
    """`invoked`: the user asked for this fill (no keystroke is waiting on it): best of N."""
    d = options.diffusion
    return DiffusionParams(threshold=d.threshold, temperature=d.temperature, confidence=d.confidence, seed=d.seed,
                           max_passes=d.max_passes, candidates=d.invoked_candidates if invoked else 1)


def syntax_tree(doc: Document) -> Any:
    """The document's tree as it is now; a plan may keep it across the engine's fill (the
    store's edits never touch a tree once handed out: DocumentTree.apply_edit)."""
    return doc.tree.tree if doc.tree is not None else None


def plan_completion(doc: Document, offset: int, options: ServerOptions, open_documents: dict[str, str],
                    invoked: bool = False) -> Plan | None:
    """What to ask the engine for at `offset`, or None when no completion belongs here (logged).
    `invoked`: the user asked for it (no unsure gate: options.line_min_token_prob and
    options.multiline_min_token_prob)."""
    tree = syntax_tree(doc)
    ctx = completion_context(doc.text, offset, doc.syntax_language, budget(options), tree=tree,
                             open_documents={u: t for u, t in open_documents.items() if u != doc.uri})
    if ctx.kind == "none":
        log.debug("no completion at %s:%d: %s", doc.uri, offset, ctx.reason)
        return None
    ctx = under_policy(ctx, options.multiline, options.multiline_max_lines)
    hole = engine_hole(ctx, doc.language, ctx.max_tokens, ctx.bucket)
    indent = block_indent(ctx, doc.syntax_language)
    if indent:  # the engine stops the fill where shaping would cut it (stop_at_dedent)
        hole = dataclasses.replace(hole, stop_indent=indent)
    bans = opening_bans(ctx, doc.syntax_language, options.empty_body)
    if bans:  # code first at an empty body: the engine never commits a comment or docstring there
        hole = dataclasses.replace(hole, banned_starts=bans)
    floor = options.line_min_token_prob if ctx.kind == "line" else options.multiline_min_token_prob
    if floor and not invoked:  # the unsure gate (shape_fill)
        hole = dataclasses.replace(hole, min_token_prob=floor)
    if not invoked:
        # A typed multi-line fill ends where its block, line cap or the gate end it, not where
        # the engine reads the code after it best (Hole.choose_end): on 46 empty bodies that
        # took the wrong lines shown 56 -> 30 but the right ones 10 -> 8, the ones that parse
        # 28 -> 26 of 32, and p50 299 -> 356 ms, p95 818 -> 1282 ms (every cut is a row chain
        # of its own; benchmarks/RESULTS.md, thirtieth session). An invoked fill reads its
        # candidates that way anyway: its ends join them.
        hole = dataclasses.replace(hole, choose_end=False)
        if options.context.near_tokens:  # the first answers at a new place read its nearest tokens
            hole = dataclasses.replace(hole, near_tokens=options.context.near_tokens)
    return Plan(doc.uri, doc.version, doc.text, offset, ctx, doc.syntax_language, tree, hole)


def resting_windows(doc: Document, offset: int, options: ServerOptions,
                    open_documents: dict[str, str]) -> tuple[str, str]:
    """The prefix and suffix the engine gets for a completion at `offset` (as plan_completion
    makes them: snippets as comments, LF line ends), wherever the cursor rests."""
    ctx = resting_context(doc.text, offset, doc.syntax_language, budget(options), tree=syntax_tree(doc),
                          open_documents={u: t for u, t in open_documents.items() if u != doc.uri})
    hole = engine_hole(ctx, doc.language, 1, None)
    return hole.prefix, hole.suffix


def block_indent(ctx: CompletionContext, language: Any) -> int | None:
    """For a multi-line completion in a language whose blocks end where a line dedents
    (`LanguageSpec.dedent_ends_block`: Python; JavaScript and TypeScript, where a body's closing
    brace sits at its opener's indentation, and only there): the least indentation a later
    line of the fill may have and stay in the block (shaping's stop_at_dedent, whose
    bound can only be higher), else None. After a block opener (`def f():` before the
    cursor) a line must be indented deeper than the opener's; on a blank line, at least
    as deep as the cursor, and, on the first line of a block's body, deeper than its opener
    even before the indentation is typed: an editor without auto-indent leaves the cursor at
    column 0 there, where the bound was 0 and an empty body's fill ran on into the next
    function to max_tokens (4-6 s; benchmarks/RESULTS.md, fifteenth session)."""
    if ctx.kind not in ("multiline", "block") or not (language is None or language.dedent_ends_block):
        return None
    line_start = ctx.prefix.rfind("\n") + 1
    line = ctx.prefix[line_start:]
    if line.strip():
        return len(leading(line)) + 1
    indent = len(line)
    opens = ctx.reason in ("empty block body", "start of block")  # the line before opens this block
    opener = len(leading(previous_nonblank_line(ctx.prefix, line_start))) + 1 if opens else 0
    if language is not None and language.indent_style == "braces":
        # The model often writes JavaScript in its own unit (2 blanks in a 4-blank file: shaping
        # re-indents it), so the cursor's column is no bound; the block's own closing brace sits
        # at its opener's: a line left of that is surely past it. Elsewhere: no bound.
        return opener or None
    return max(indent, opener) or None


def engine_hole(ctx: CompletionContext, language: Any, max_tokens: int, bucket: int | None) -> Hole:
    """The engine's hole for a context: snippets as comments, LF line ends (the model was
    trained on LF text; shaping converts a fill back to the document's CRLF). Shaping cuts a
    fill that loops (drop_repetition) for every kind of hole, so every hole asks the engine to
    end the fill where the loop starts (stop_repeats): the passes after it are never run."""
    prefix = with_snippets(ctx, language) if ctx.snippets else ctx.prefix
    # A rest-of-line completion ends at its newline: the engine then stops denoising
    # the slots after it (fewer passes), instead of shaping cutting them off afterwards.
    stop = ("\n",) if ctx.kind == "line" else ()
    return Hole(prefix=prefix.replace("\r\n", "\n"), suffix=ctx.suffix.replace("\r\n", "\n"),
                max_tokens=max_tokens, bucket=bucket, stop=stop, stop_repeats=True, max_lines=ctx.max_lines)


def request_for(holes: list[Hole], options: ServerOptions, priority: str = "interactive",
                invoked: bool = False) -> InfillRequest:
    p = params(options, invoked)
    if len(holes) * p.candidates > 256:  # the engine's fills per request: many holes fill once each
        p = dataclasses.replace(p, candidates=max(1, 256 // len(holes)))
    return InfillRequest(holes=holes, params=p, priority=priority)  # type: ignore[arg-type]


def shape_fill(plan: Plan, fill: HoleResult) -> Suggestion | None:
    """The suggestion an engine's fill makes, or None. A fill the engine ended unsure (the
    hole's min_token_prob) shows only what the model was sure of: of a single line nothing
    (what came before the unsure token is a guess too), of a multi-line fill its complete
    lines before that token."""
    if fill.finish_reason == "unsure":
        kept = unsure_lines(plan, fill.text)
        if not kept:
            log.debug("unsure fill not shown: %r", fill.text[:80])
            return None
        return shape(plan, kept)
    return shape(plan, fill.text)


def unsure_lines(plan: Plan, text: str) -> str:
    """What an unsure fill may show: the lines it finished before the unsure token (none for
    a single line's fill: its one line was not finished), less any last lines that open a
    block (`for x in xs:`, `if (ok) {`): the model was unsure inside that block's body, and a
    block left empty does not parse."""
    if plan.ctx.kind == "line":
        return ""
    lines = text[:text.rfind("\n") + 1].split("\n")[:-1]
    while lines and lines[-1].rstrip().endswith((":", "{")):
        lines.pop()
    kept = "\n".join(lines)
    return kept + "\n" if kept.strip() else ""


def with_alternatives(plan: Plan, main: Suggestion | None, fill: HoleResult) -> Suggestion | None:
    """Best of N's suggestions: `main` (the best-read fill, shaped; None where shaping dropped
    it) and the fill's alternatives (best read first), each shaped as any fill, none twice.
    The first with which the document has the fewest syntax errors is offered, the others
    after it in the engine's order (fill_choice.py: the model's reading favours short fills,
    an empty one most, and a fill that breaks the file is never the one wanted while another
    parses)."""
    options = [main] if main is not None else []
    seen = {main.text} if main is not None else set()
    for text in fill.alternatives:
        other = shape(plan, text)
        if other is not None and other.text not in seen:
            seen.add(other.text)
            options.append(other)
    if not options:
        return None
    # A document the server does not parse (huge, or no grammar: no tree) is not parsed here either.
    language = plan.language if plan.tree is not None else None
    best = fewest_errors([plan.text[:s.offset] + s.text + plan.text[s.replace_end:] for s in options], language,
                         Original(plan.text, plan.tree), [(s.offset, s.offset + len(s.text)) for s in options])
    first, others = options[best], options[:best] + options[best + 1:]
    return dataclasses.replace(first, others=tuple(others))


def shape(plan: Plan, completion: str) -> Suggestion | None:
    shaped = shape_completion(plan.text, plan.offset, completion, plan.ctx, plan.language, tree=plan.tree)
    if shaped is None or not shaped.text:
        log.debug("completion dropped by shaping: %r", completion[:80])
        return None
    return Suggestion(shaped.text, plan.offset, max(plan.offset, shaped.replace_end))


def plan_range(doc: Document, start: int, end: int, options: ServerOptions) -> tuple[CompletionContext, Hole]:
    """Context and hole for re-generating `text[start:end]` with both sides as context."""
    ctx = range_context(doc.text, start, end, doc.syntax_language, budget(options), tree=syntax_tree(doc))
    max_tokens = min(1024, ctx.max_tokens)  # the engine's per-hole cap
    bucket = ctx.bucket if ctx.bucket is not None and ctx.bucket <= max_tokens else None
    return ctx, engine_hole(ctx, doc.language, max_tokens, bucket)
