"""The language server: state, lifecycle and document sync. Features live in their own modules.

Nothing here imports torch: `initialize` is answered before any model loads;
the engine connects (and the in-process engine loads its model, in a worker
thread) after `initialized`, reported through `$/progress` and `dllm/status`.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from typing import Any

from lsprotocol import types
from pygls.capabilities import ServerCapabilitiesBuilder
from pygls.lsp.server import LanguageServer

from .. import __version__
from .conversions import Encoding, normalize_encoding
from .cursor_prepare import CursorPrepare
from .documents import DocumentStore
from .engine_manager import EngineManager, EngineStatus
from .inflight import InflightRequests
from .options import ServerOptions, parse_options
from .prefetch import NextLinePrefetch
from .protocol import DllmProtocol
from .scheduler import RequestScheduler
from .suggestion_cache import SuggestionCache

log = logging.getLogger(__name__)

STATUS_NOTIFICATION = "dllm/status"
CONFIG_SECTION = "dllm"


class DllmServer(LanguageServer):
    def __init__(self, base_settings: dict[str, Any] | None = None) -> None:
        super().__init__("dllm-lsp", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         protocol_cls=DllmProtocol)
        # Settings from the command line; initializationOptions and configuration override them.
        self.base_settings = base_settings or {}
        self.options, problems = parse_options(self.base_settings)
        for problem in problems:
            log.warning("command-line setting: %s", problem)
        self.encoding: Encoding = "utf-16"
        self.documents = DocumentStore()
        self.cache = SuggestionCache()
        self.prefetch = NextLinePrefetch(self)
        self.cursor_prepare = CursorPrepare(self)
        self.inflight = InflightRequests()
        self.scheduler = RequestScheduler(self.options.debounce_ms / 1000)
        self.engine = EngineManager(self.options.engine, self.publish_status, self.show_problem)
        self.diagnostics = None  # set by diagnostics.register
        self.next_edits = None  # set by next_edit.feature.register
        self._shutting_down = False
        self._progress_count = 0
        self._said_internal_error = False
        self._shown_problems: list[str] = []

    # ------------------------------------------------------------ messages

    def publish_status(self, status: EngineStatus) -> None:
        if not self._shutting_down:
            self.protocol.notify(STATUS_NOTIFICATION, status.to_json())
            if status.state == "ready":
                self.cursor_prepare.engine_ready()

    def show_problem(self, message: str, kind: types.MessageType = types.MessageType.Error) -> None:
        """A problem the user must act on (callers make sure it is said once, not per keystroke)."""
        if not self._shutting_down:
            self.window_show_message(types.ShowMessageParams(type=kind, message=f"dllm-lsp: {message}"))

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Errors outside a request (a failing notification handler): logged, and shown once.

        pygls would show every one, which for a bug in didChange means a message per keystroke.
        """
        log.error("server error (%s): %s", getattr(source, "__name__", source), error)
        if not self._said_internal_error and source.__name__ != "FeatureRequestError":
            self._said_internal_error = True
            self.show_problem(f"internal error, see the server log: {error}")

    # ------------------------------------------------------------- settings

    def apply_settings(self, settings: Any, base: ServerOptions | None = None) -> ServerOptions:
        start = base if base is not None else parse_options(self.base_settings)[0]
        options, problems = parse_options(settings, start)
        for problem in problems:
            log.warning("setting: %s", problem)
        # Clients restate settings (Neovim sends didChangeConfiguration right after
        # initialize): the same problems are shown once, not at every restatement.
        if problems and problems != self._shown_problems:
            self.show_problem("invalid settings, defaults used for: " + "; ".join(problems), types.MessageType.Warning)
        self._shown_problems = problems
        self.options = options
        self.scheduler.debounce_s = options.debounce_ms / 1000
        self.cache.clear()
        self.prefetch.cancel_all()  # planned under the old settings
        self.cursor_prepare.cancel()
        return options

    # ------------------------------------------------------------ lifecycle

    def ensure_engine_started(self) -> None:
        """Start connecting the engine if it is enabled, not connected and not connecting."""
        if self.engine.enabled and self.engine.status.state == "loading" and not self.engine.warming:
            asyncio.ensure_future(self.load_engine())

    async def load_engine(self) -> None:
        """Connect the engine and load its model, showing `$/progress` where the client supports it."""
        token = None
        caps = self.client_capabilities.window
        if caps is not None and caps.work_done_progress:
            self._progress_count += 1
            token = f"dllm-engine-load-{self._progress_count}"
            try:
                await asyncio.wait_for(self.work_done_progress.create_async(token), 10)
                self.work_done_progress.begin(
                    token, types.WorkDoneProgressBegin(title="dllm: starting the engine", cancellable=False)
                )
            except Exception as exc:  # progress is a courtesy; loading goes on without it
                log.info("no $/progress: %s", exc)
                token = None

        def report(message: str) -> None:
            if token is not None:
                self.work_done_progress.report(token, types.WorkDoneProgressReport(message=message))

        try:
            ok = await self.engine.start_warm_up(report)
        finally:
            if token is not None:
                self.work_done_progress.end(token, types.WorkDoneProgressEnd(
                    message="ready" if self.engine.status.state == "ready" else "failed"))
        log.info("engine %s", "ready" if ok else f"not ready: {self.engine.status.message}")


def create_server(base_settings: dict[str, Any] | None = None) -> DllmServer:
    from . import code_actions, commands, completion, cursor_prepare, diagnostics, inline_completion
    from .next_edit import feature as next_edit_feature

    ls = DllmServer(base_settings)

    @ls.feature(types.INITIALIZE)
    def on_initialize(params: types.InitializeParams) -> None:
        ls.encoding = normalize_encoding(ServerCapabilitiesBuilder.choose_position_encoding(params.capabilities))
        ls.apply_settings(params.initialization_options)
        # No notification before the initialize response: `initialized` publishes the status.
        ls.engine = EngineManager(ls.options.engine, ls.publish_status, ls.show_problem, enabled=ls.options.enable)
        log.info("initialize: position encoding %s, engine %s", ls.encoding, ls.options.engine.mode)

    @ls.feature(types.INITIALIZED)
    def on_initialized(params: types.InitializedParams) -> None:
        ls.publish_status(ls.engine.status)
        asyncio.ensure_future(_preload())
        ls.ensure_engine_started()

    @ls.feature(types.SHUTDOWN)
    async def on_shutdown(*args) -> None:
        ls._shutting_down = True
        ls.scheduler.cancel_all()
        ls.prefetch.cancel_all()
        ls.cursor_prepare.cancel()
        await ls.engine.close()

    @ls.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def on_open(params: types.DidOpenTextDocumentParams) -> None:
        doc = ls.documents.open(params.text_document)
        if ls.diagnostics is not None:
            ls.diagnostics.opened(doc.uri, doc.text)

    @ls.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def on_change(params: types.DidChangeTextDocumentParams) -> None:
        before = ls.documents.get(params.text_document.uri)
        old_text = before.text if before is not None else None
        doc = ls.documents.change(params, ls.encoding)
        if doc is not None and ls.diagnostics is not None:
            ls.diagnostics.schedule(doc.uri)
        if doc is not None and old_text is not None and ls.next_edits is not None:
            ls.next_edits.changed(doc, old_text)

    @ls.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def on_close(params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.documents.close(uri)
        ls.cache.clear(uri)
        ls.prefetch.cancel(uri)
        ls.scheduler.supersede(f"inline:{uri}")
        ls.scheduler.supersede(f"completion:{uri}")
        if ls.diagnostics is not None:
            ls.diagnostics.forget(uri)
        if ls.next_edits is not None:
            ls.next_edits.forget(uri)

    @ls.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def on_configuration(params: types.DidChangeConfigurationParams) -> None:
        settings = params.settings
        if isinstance(settings, dict) and CONFIG_SECTION in settings:
            settings = settings[CONFIG_SECTION]
        elif not settings:
            settings = await _pull_configuration(ls)
        if settings is None:
            return
        # A configuration change restates the settings: start from the
        # command-line base so a removed key returns to its default.
        old_engine = ls.options.engine
        options = ls.apply_settings(settings)
        ls.engine.set_enabled(options.enable)
        if options.engine != old_engine:
            await ls.engine.reconfigure(options.engine)
        ls.ensure_engine_started()

    completion.register(ls)
    inline_completion.register(ls)
    code_actions.register(ls)
    commands.register(ls)
    diagnostics.register(ls)
    next_edit_feature.register(ls)
    cursor_prepare.register(ls)
    return ls


async def _preload() -> None:
    """Import the syntax layer and range edits in a thread once `initialize` is answered."""
    for name in ("dllm_lsp.server.infill", "dllm_lsp.server.range_edits"):
        try:
            await asyncio.to_thread(importlib.import_module, name)
        except Exception:
            log.exception("preloading %s failed", name)


async def _pull_configuration(ls: DllmServer) -> Any:
    caps = ls.client_capabilities.workspace
    if caps is None or not caps.configuration:
        return None
    try:
        result = await asyncio.wait_for(ls.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(section=CONFIG_SECTION)])), 5)
    except Exception as exc:
        log.warning("workspace/configuration failed: %s", exc)
        return None
    return result[0] if result else None
