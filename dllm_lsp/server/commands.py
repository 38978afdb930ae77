"""workspace/executeCommand: the commands both editor clients bind (see the LSP contract)."""

from __future__ import annotations

import asyncio
import logging
import resource
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from .conversions import InvalidPosition

if TYPE_CHECKING:
    from .server import DllmServer

log = logging.getLogger(__name__)


class CommandError(ValueError):
    pass


def _uri(args: tuple[Any, ...], i: int = 0) -> str:
    if len(args) <= i or not isinstance(args[i], str):
        raise CommandError(f"argument {i + 1} must be a document URI")
    return args[i]


async def _apply(ls: "DllmServer", label: str, edit: types.WorkspaceEdit | None) -> dict[str, Any]:
    if edit is None:
        ls.show_problem(f"{label}: no edit (see the server log for why)", types.MessageType.Info)
        return {"applied": False}
    result = await ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=label))
    if not result.applied:
        log.info("%s: the client did not apply the edit: %s", label, result.failure_reason)
    return {"applied": bool(result.applied), "edit": ls.protocol._converter.unstructure(edit)}


def register(ls: "DllmServer") -> None:
    @ls.command("dllm.regenerateSelection")
    async def regenerate(*args: Any) -> dict[str, Any]:
        uri = _uri(args)
        try:
            rng = ls.protocol._converter.structure(args[1], types.Range)
        except Exception as exc:
            raise CommandError(f"argument 2 must be an LSP range: {exc}") from None
        from .range_edits import regenerate_selection

        try:
            edit = await regenerate_selection(ls, uri, rng)
        except InvalidPosition as exc:
            raise CommandError(f"invalid range: {exc}") from None
        return await _apply(ls, "dllm: regenerate selection", edit)

    @ls.command("dllm.fillHoles")
    async def fill(*args: Any) -> dict[str, Any]:
        from .range_edits import fill_holes

        return await _apply(ls, "dllm: fill holes", await fill_holes(ls, _uri(args)))

    @ls.command("dllm.toggleCompletions")
    def toggle(*args: Any) -> dict[str, bool]:
        if args and not isinstance(args[0], bool):
            raise CommandError("the argument, if any, must be true or false")
        enabled = args[0] if args else not ls.engine.enabled
        ls.engine.set_enabled(enabled)
        if not enabled:
            ls.scheduler.cancel_all()
            ls.prefetch.cancel_all()
            ls.cursor_prepare.cancel()
        ls.ensure_engine_started()
        return {"enabled": enabled}

    @ls.command("dllm.restartEngine")
    async def restart(*args: Any) -> dict[str, Any]:
        ls.scheduler.cancel_all()
        ls.prefetch.cancel_all()
        ls.cursor_prepare.cancel()
        await ls.engine.restart()
        ls.ensure_engine_started()
        return ls.engine.status.to_json()

    @ls.command("dllm.engineStatus")
    def status(*args: Any) -> dict[str, Any]:
        return ls.engine.status.to_json()

    @ls.command("dllm.serverStats")
    async def stats(*args: Any) -> dict[str, Any]:
        """Counters for benchmarks and bug reports (not part of the editor contract)."""
        last = ls.engine.last_result
        health = None
        if ls.engine.client is not None:
            try:
                health = await asyncio.wait_for(ls.engine.client.health(), 5)
            except Exception as exc:
                health = {"error": str(exc)}
        return {
            "scheduler": ls.scheduler.stats.to_json(),
            "prefetch": {**ls.prefetch.stats.to_json(), "served": ls.cache.prefetch_served,
                         "engineRequests": ls.engine.background_requests,
                         "engineCancelled": ls.engine.background_cancelled},
            "cursorPrepare": ls.cursor_prepare.stats.to_json(),
            "engineRequests": ls.engine.requests,
            "engineCancelled": ls.engine.cancelled,
            "sharedEngineCalls": ls.inflight.joined,
            "engineFailures": ls.engine.failures,
            "lastResult": None if last is None else {
                "passes": last.passes, "elapsedMs": last.elapsed_ms, "model": last.model,
                "holes": [{"text": h.text, "finishReason": h.finish_reason, "tokens": h.tokens,
                           "alternatives": len(h.alternatives)} for h in last.holes]},
            "engineHealth": health,
            "engineAnswerMs": list(ls.scheduler.engine_answers),
            "maxRssKb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        }
