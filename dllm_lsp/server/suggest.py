"""The keystroke pipeline shared by completion and inline completion.

position -> offset (invalid: empty) -> cache (typing through a suggestion) ->
debounce + supersession -> plan (syntax context) -> engine -> shaping -> cache.
The plan is made at once on a snapshot of the document (so requests where no
completion belongs are answered without waiting); if the document changed
during the debounce, the request is stale and answered empty without asking
the engine (the client asks again for the newer text).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from lsprotocol import types

from .conversions import InvalidPosition, LineIndex
from .suggestion_cache import CachedSuggestion

if TYPE_CHECKING:
    from .infill import Suggestion
    from .server import DllmServer

log = logging.getLogger(__name__)


def typing_key(kind: str) -> str:
    """The scheduler's key for a completion of `kind` ("inline", "completion"): one for every
    document, since the user types in one place. A request supersedes the one pending for any
    document: in the keystroke replay a function's last request, still running when the typist
    went on to the next file, met that file's first request, whose new context was encoded
    between its passes (0.9 s on 2 cores), for an answer nobody would see."""
    return kind


async def suggest(ls: "DllmServer", uri: str, position: types.Position, kind: str,
                  invoked: bool = False) -> "tuple[Suggestion, LineIndex] | None":
    """A suggestion at `position` and the line index of the snapshot it refers to, or None (reason logged).
    `invoked`: the user asked for it explicitly (best of N, options.diffusion.invoked_candidates)."""
    arrived = time.perf_counter()
    # The syntax layer loads after `initialize` (server.preload), not on the way to it.
    from .infill import Suggestion, language_enabled, plan_completion, request_for, shape_fill, with_alternatives

    opts = ls.options
    if not opts.enable or not ls.engine.enabled:
        return None
    doc = ls.documents.get(uri)
    if doc is None:
        log.warning("%s request for a document that is not open: %s", kind, uri)
        return None
    if not language_enabled(doc, opts):
        log.debug("completions are off for %s", doc.language.name)
        return None
    try:
        offset = doc.index.offset(position, ls.encoding)
    except InvalidPosition as exc:
        log.warning("%s request at an invalid position in %s: %s", kind, uri, exc)
        return None

    key = typing_key(kind)
    text = doc.text
    if not invoked and await ls.prefetch.join(uri, text, offset):  # Enter came before the prefetch finished
        doc = ls.documents.get(uri)
        if doc is None or doc.text != text:
            return None  # the document changed while waiting: the client asks again
    # An explicit request is a fresh best of N (its other fills offered too), never an answer
    # kept from typing: not the suggestion on screen again, nor a "nothing" guessed for typing.
    cached = None if invoked else ls.cache.get(uri, doc.text, offset)
    if cached is not None:
        ls.scheduler.supersede(key)  # the user moved on from whatever was pending
        ls.scheduler.stats.cache_hits += 1
        if not cached.text:
            return None  # a prefetch found nothing here, or a line's suggestion was typed to its end
        end = min(len(doc.text), offset + cached.replace_chars)
        found = Suggestion(cached.text, offset, end)
        ls.prefetch.after(doc, doc.text, found)  # the line after this one (no-op when known)
        return found, doc.index

    # Decide at once (on this request's snapshot) whether a completion belongs here,
    # so "no completion" answers do not wait for the debounce.
    index = doc.index
    try:
        plan = plan_completion(doc, offset, opts, ls.documents.texts(), invoked=invoked)
    except Exception:  # a bug in context extraction must cost one suggestion, not the server
        log.exception("context extraction failed at %s:%d", uri, offset)
        plan = None
    if plan is None:
        ls.scheduler.supersede(key)  # whatever was pending for this document is moot now
        return None

    async def work() -> "tuple[Suggestion, LineIndex] | None":
        current = ls.documents.get(uri)
        if current is None or current.version != plan.version:
            log.debug("stale %s request for %s (document changed during the debounce)", kind, uri)
            return None
        ls.prefetch.cancel_all()  # this request needs the engine: no guess about a next line may delay it
        ls.cursor_prepare.cancel()  # nor a context prepared for a place (this one's: the engine keeps what it encoded)
        # Inline and ordinary completion at the same snapshot share one engine call.
        result = await ls.inflight.run((uri, plan.version, offset, plan.hole, invoked),
                                       lambda: ls.engine.infill(request_for([plan.hole], opts, invoked=invoked)))
        if result is None or not result.holes:
            return None
        ls.scheduler.engine_answers.append({
            "kind": plan.ctx.kind, "ms": (time.perf_counter() - arrived) * 1000,
            "engineMs": result.elapsed_ms, "queuedMs": result.queued_ms, "passes": result.passes,
            # What the engine did while the request waited, and while it ran (passes, encoding, scoring...).
            "queuedFor": result.queued_for, "activeFor": result.active_for,
            "contextTokens": result.context_tokens, "cachedTokens": result.cached_tokens,
            "near": bool(result.near_holes),  # read from the near part of a new place's context
            # The hole's windows in characters (never its text): where a cache miss came from.
            "prefixChars": len(plan.hole.prefix), "suffixChars": len(plan.hole.suffix), "offset": offset,
            "unsure": result.holes[0].finish_reason == "unsure"})
        try:
            suggestion = shape_fill(plan, result.holes[0])
        except Exception:
            log.exception("shaping failed for %r", result.holes[0].text[:80])
            return None
        unsure = result.holes[0].finish_reason == "unsure"
        if unsure:
            ls.scheduler.stats.count_unsure(shown=suggestion is not None)
        # Best of N (an explicit request): the other fills too, and one of them offered first
        # where the file parses better with it, or where shaping dropped the best-read fill
        # (not where the unsure gate did: the model was unsure of the hole itself).
        if result.holes[0].alternatives and (suggestion is not None or not unsure):
            try:
                suggestion = with_alternatives(plan, suggestion, result.holes[0])
            except Exception:
                log.exception("shaping best of N's other fills failed; offering the best alone")
        if suggestion is None:
            return None
        ls.cache.put(uri, plan.text, offset, CachedSuggestion(suggestion.text, suggestion.replace_end - offset))
        current = ls.documents.get(uri)
        if current is not None:
            ls.prefetch.after(current, plan.text, suggestion)
        return suggestion, index

    return await ls.scheduler.run(key, work)
