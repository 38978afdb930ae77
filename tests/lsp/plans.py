"""The server's plan for a typed or invoked completion at a marked place (█), under settings:
what the policy tests read the engine's hole from."""

from __future__ import annotations

from lsprotocol import types

from dllm_lsp.server.documents import DocumentStore
from dllm_lsp.server.infill import plan_completion
from dllm_lsp.server.options import parse_options


def plan(text: str, invoked: bool, settings: dict | None = None):
    """(Plan, ServerOptions) at the █ in `text`."""
    options, errors = parse_options(settings or {})
    assert not errors
    doc = DocumentStore().open(types.TextDocumentItem(uri="file:///t.py", language_id="python", version=1,
                                                      text=text.replace("█", "")))
    return plan_completion(doc, text.index("█"), options, {}, invoked=invoked), options
