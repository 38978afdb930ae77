"""The keystroke pipeline shared by completion and inline completion.

position -> offset (invalid: empty) -> cache (typing through a suggestion) ->
debounce + supersession -> plan (syntax context) -> engine -> shaping -> cache.
Work is done on a snapshot of the document taken after the debounce; if the
document changed meanwhile, the request is stale and answered empty.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lsprotocol import types

from .conversions import InvalidPosition, LineIndex
from .infill import Suggestion, language_enabled, plan_completion, request_for, shape
from .suggestion_cache import CachedSuggestion

if TYPE_CHECKING:
    from .server import DllmServer

log = logging.getLogger(__name__)


async def suggest(ls: "DllmServer", uri: str, position: types.Position, kind: str) -> tuple[Suggestion, LineIndex] | None:
    """A suggestion at `position` and the line index of the snapshot it refers to, or None (reason logged)."""
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

    key = f"{kind}:{uri}"
    cached = ls.cache.get(uri, doc.text, offset)
    if cached is not None:
        ls.scheduler.supersede(key)  # the user moved on from whatever was pending
        ls.scheduler.stats.cache_hits += 1
        end = min(len(doc.text), offset + cached.replace_chars)
        return Suggestion(cached.text, offset, end), doc.index

    version = doc.version

    async def work() -> tuple[Suggestion, LineIndex] | None:
        current = ls.documents.get(uri)
        if current is None or current.version != version:
            log.debug("stale %s request for %s (document changed during the debounce)", kind, uri)
            return None
        index = current.index
        plan = plan_completion(current, offset, opts, ls.documents.texts())
        if plan is None:
            return None
        result = await ls.engine.infill(request_for([plan.hole], opts))
        if result is None or not result.holes:
            return None
        suggestion = shape(plan, result.holes[0].text)
        if suggestion is None:
            return None
        ls.cache.put(uri, plan.text, offset, CachedSuggestion(suggestion.text, suggestion.replace_end - offset))
        return suggestion, index

    return await ls.scheduler.run(key, work)
