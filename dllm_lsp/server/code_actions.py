"""Code actions: "Regenerate selection with dllm" and quick fixes for suspicious tokens.

The regenerate action is cheap to list and costly to compute (an engine call),
so where the client resolves `edit` lazily it gets the edit in
`codeAction/resolve`; other clients get a command that applies it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from .conversions import InvalidPosition
from .diagnostics import DIAGNOSTIC_SOURCE

if TYPE_CHECKING:
    from .server import DllmServer

log = logging.getLogger(__name__)

REGENERATE_TITLE = "Regenerate selection with dllm"
REGENERATE_COMMAND = "dllm.regenerateSelection"


def _resolves_edit(ls: "DllmServer") -> bool:
    td = ls.client_capabilities.text_document
    ca = td.code_action if td is not None else None
    support = ca.resolve_support if ca is not None else None
    return support is not None and "edit" in support.properties


def register(ls: "DllmServer") -> None:
    @ls.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.RefactorRewrite, types.CodeActionKind.QuickFix],
            resolve_provider=True,
        ),
    )
    def on_code_action(params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        actions = [fix for d in params.context.diagnostics if (fix := quick_fix(uri, d)) is not None]
        rng = params.range
        wanted = params.context.only
        empty = (rng.start.line, rng.start.character) == (rng.end.line, rng.end.character)
        if not empty and ls.options.enable and ls.documents.get(uri) is not None and (
            not wanted or any(types.CodeActionKind.RefactorRewrite.value.startswith(k) or
                              str(k).startswith("refactor") for k in wanted)
        ):
            data = {"uri": uri, "range": ls.protocol._converter.unstructure(rng)}
            action = types.CodeAction(title=REGENERATE_TITLE, kind=types.CodeActionKind.RefactorRewrite, data=data)
            if not _resolves_edit(ls):
                action.command = types.Command(title=REGENERATE_TITLE, command=REGENERATE_COMMAND,
                                               arguments=[uri, data["range"]])
            actions.append(action)
        return actions

    @ls.feature(types.CODE_ACTION_RESOLVE)
    async def on_resolve(action: types.CodeAction) -> types.CodeAction:
        data: Any = action.data
        if action.title != REGENERATE_TITLE or not isinstance(data, dict):
            return action
        from .range_edits import regenerate_selection

        try:
            rng = ls.protocol._converter.structure(data["range"], types.Range)
            edit = await regenerate_selection(ls, data["uri"], rng)
        except (KeyError, TypeError, InvalidPosition) as exc:
            log.warning("codeAction/resolve with bad data %r: %s", data, exc)
            return action
        if edit is None:
            ls.show_problem("could not regenerate the selection (see the server log)", types.MessageType.Info)
        else:
            action.edit = edit
        return action


def quick_fix(uri: str, diagnostic: types.Diagnostic) -> types.CodeAction | None:
    """The quick fix a suspicious-token diagnostic carries in its `data`."""
    data = diagnostic.data
    if diagnostic.source != DIAGNOSTIC_SOURCE or not isinstance(data, dict) or "replacement" not in data:
        return None
    replacement = str(data["replacement"])
    return types.CodeAction(
        title=f"Replace with '{replacement}' (dllm)",
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic],
        edit=types.WorkspaceEdit(changes={uri: [types.TextEdit(range=diagnostic.range, new_text=replacement)]}),
    )
