"""The engine connection: created from the options, watched, and restarted when it fails.

Every engine call goes through `EngineManager.infill`, which never raises for
engine trouble: it returns None and logs why. The user hears about a problem
once, when the state changes to "error" (not once per keystroke), and again
only after the engine recovered and failed anew. A failed connection is closed
and rebuilt on a later request, with a growing back-off so a dead engine costs
nothing per keystroke.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from dllm_engine.protocol import EngineBusy, InfillRequest, InfillResult, ProtocolError, RequestCancelled

from .engine_factory import create_client, describe_model
from .options import EngineOptions

if TYPE_CHECKING:  # dllm_engine.clients imports httpx (~0.3 s): not on the way to `initialize`
    from dllm_engine.clients import EngineClient
    from dllm_engine.next_edit import NextEditRequest, NextEditResult
    from dllm_engine.prepare import PrepareRequest, PrepareResult

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0
# An interactive request that takes longer than this is abandoned (the engine is
# told through `deadline_s` first, then the await is cancelled after a grace).
DEFAULT_TIMEOUT_S = 20.0
LOAD_TIMEOUT_S = 600.0
# Modes where a model loads (seconds to minutes) before requests are served: in
# process on the first request, or in our daemon. An OpenAI endpoint is opaque.
MODEL_LOADING_MODES = ("inProcess", "daemon", "remote")
# dllm/status goes out when the state or message changes; a new latency alone (every
# request) at most this often, so a status bar stays fresh without a notification per
# keystroke (86 in 60 s once). `dllm.engineStatus` always has the latest.
LATENCY_STATUS_EVERY_S = 5.0


@dataclass
class EngineStatus:
    state: str  # loading | ready | error | disabled
    model: str
    last_latency_ms: float | None = None
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "model": self.model, "lastLatencyMs": self.last_latency_ms, "message": self.message}


class EngineManager:
    def __init__(
        self,
        options: EngineOptions,
        on_status: Callable[[EngineStatus], None],
        on_problem: Callable[[str], None],
        factory: Callable[[EngineOptions], "EngineClient"] = create_client,
        enabled: bool = True,
    ) -> None:
        self._options = options
        self._on_status = on_status
        self._on_problem = on_problem
        self._factory = factory
        self._client: "EngineClient | None" = None
        self._retry_at = 0.0
        self._backoff = 1.0
        self._loaded = False
        self.enabled = enabled
        # The model the engine says it serves once loaded: a daemon started by another session
        # or by hand may serve another model than the options name (or "default" names none).
        self._served_model: str | None = None
        self.status = EngineStatus("loading" if enabled else "disabled", describe_model(options))
        self.requests = 0
        self.failures = 0
        self.cancelled = 0  # engine requests cancelled before they finished (superseded or $/cancelRequest)
        # Requests the server makes on its own (the next line's prefetch), counted apart: the
        # counters above and last_result stay about what the editor asked for.
        self.background_requests = 0
        self.background_cancelled = 0
        self.last_result: InfillResult | None = None
        self._warming: asyncio.Task | None = None
        self._latency_sent_at = float("-inf")

    def start_warm_up(self, report: Callable[[str], None] | None = None) -> asyncio.Task:
        """Load the engine in the background (the server answers meanwhile)."""
        if self._warming is None or self._warming.done():
            self._warming = asyncio.ensure_future(self.warm_up(report))
        return self._warming

    @property
    def client(self) -> "EngineClient | None":
        """The current connection, if any (None before the first request and after a failure)."""
        return self._client

    @property
    def warming(self) -> bool:
        """The warm-up task is running (in any mode)."""
        return self._warming is not None and not self._warming.done()

    @property
    def loading(self) -> bool:
        """A model is loading (in process or in a daemon): keystrokes should not queue behind it.

        An OpenAI endpoint has no load step we can see, so its warm-up (a
        health check) never holds requests back.
        """
        return (self._options.mode in MODEL_LOADING_MODES and self._warming is not None
                and not self._warming.done())

    # ------------------------------------------------------------------ state

    def _set_status(self, state: str, message: str | None = None, latency: float | None = None) -> None:
        previous = self.status
        new = EngineStatus(state, self._served_model or describe_model(self._options),
                           latency if latency is not None else previous.last_latency_ms, message)
        self.status = new
        changed = (new.state, new.message) != (previous.state, previous.message)
        now = time.monotonic()
        if changed or (latency is not None and now - self._latency_sent_at >= LATENCY_STATUS_EVERY_S):
            self._latency_sent_at = now if new.last_latency_ms is not None else self._latency_sent_at
            self._on_status(new)
        if state == "error" and previous.state != "error":
            self._on_problem(message or "the engine failed")

    def set_enabled(self, enabled: bool) -> None:
        self.enabled = enabled
        if not enabled:
            self._set_status("disabled")
        elif self.status.state == "disabled":
            self._set_status("ready" if self._loaded else "loading")

    async def reconfigure(self, options: EngineOptions) -> None:
        if options == self._options:
            return
        self._options = options
        await self.restart()

    async def restart(self) -> None:
        if self._warming is not None and not self._warming.done():
            self._warming.cancel()
        self._warming = None
        await self._drop_client()
        self._retry_at, self._backoff, self._loaded = 0.0, 1.0, False
        self._served_model = None
        if self.enabled:
            self._set_status("loading")

    async def close(self) -> None:
        await self._drop_client()

    async def _drop_client(self) -> None:
        client, self._client = self._client, None
        self._loaded = False  # a new client loads its model again (through the warm-up task)
        if client is not None:
            try:
                await client.close()
            except Exception:
                log.exception("closing the engine client failed")

    def _get_client(self) -> "EngineClient | None":
        if self._client is not None:
            return self._client
        if time.monotonic() < self._retry_at:
            return None
        try:
            self._client = self._factory(self._options)
        except Exception as exc:
            self._fail(f"cannot create the engine client: {exc}")
            return None
        return self._client

    def _fail(self, message: str) -> None:
        self.failures += 1
        self._retry_at = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, MAX_BACKOFF_S)
        log.error("engine problem (retry in %.0fs): %s", self._retry_at - time.monotonic(), message)
        self._set_status("error", message)

    # --------------------------------------------------------------- requests

    async def warm_up(self, report: Callable[[str], None] | None = None) -> bool:
        """Connect and load the model before the first keystroke needs it."""
        # Import the clients (httpx) off the event loop, so the server keeps answering meanwhile.
        await asyncio.to_thread(importlib.import_module, "dllm_engine.clients")
        client = self._get_client()
        if client is None:
            return False
        self._set_status("loading")
        failures = self.failures
        try:
            if self._options.mode in MODEL_LOADING_MODES:
                # The model loads on the first request (in-process) or is loading in the
                # daemon: a one-token fill, retried while the daemon says "loading",
                # returns once the weights are in and warm.
                if report:
                    report("loading the model")
                await asyncio.wait_for(self._probe_until_loaded(client), LOAD_TIMEOUT_S)
                self._served_model = await _served_model(client)
            else:
                if report:
                    report("connecting")
                log.info("engine health: %s", await asyncio.wait_for(client.health(), 30))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # The back-off first: closing the client yields to the loop, and a request that ran
            # then found no client and no back-off, so it built a new one and failed again.
            self._fail(_explain(exc))
            await self._drop_client()
            return False
        if self.failures != failures:
            return False  # a request failed meanwhile: its error stands
        self._mark_ready()
        return True

    async def _probe_until_loaded(self, client: "EngineClient") -> None:
        from dllm_engine.clients import EngineUnavailable
        from dllm_engine.protocol import Hole

        while True:
            probe = InfillRequest(holes=[Hole(prefix="def f():\n    ", suffix="\n", max_tokens=1)], priority="batch")
            try:
                await client.infill(probe)
                return
            except EngineUnavailable as exc:
                if "loading" not in str(exc):  # the daemon answers 503 "model loading" until ready
                    raise
            await asyncio.sleep(0.25)

    def _mark_ready(self, latency: float | None = None) -> None:
        self._loaded = True
        self._backoff = 1.0
        if self.enabled and (self.status.state != "ready" or latency is not None):
            self._set_status("ready", None, latency)

    async def infill(
        self, request: InfillRequest, timeout_s: float = DEFAULT_TIMEOUT_S, wait_for_load: bool = False,
        background: bool = False,
    ) -> InfillResult | None:
        """The engine's answer, or None (logged) when there is none to give.

        Cancelling the awaiting task cancels the request in the engine: the
        clients turn a cancelled await into an engine-side cancel. While the
        model loads, keystroke requests return None at once (`wait_for_load`
        False) rather than queue behind the load; commands wait for it.
        """
        if not self.enabled:
            return None
        if not self._loaded and self._options.mode in MODEL_LOADING_MODES:
            # Only the warm-up task loads a model (a load cannot be cancelled half-way, so
            # a keystroke must never start one): start it if needed, and wait only for commands.
            warming = self.start_warm_up()
            if not wait_for_load:
                log.info("no completion: the engine is still loading")
                return None
            if not await asyncio.shield(warming):
                return None
        client = self._get_client()
        if client is None:
            log.info("no engine request: the engine is in back-off after: %s", self.status.message)
            return None
        if background:
            self.background_requests += 1
        else:
            self.requests += 1
        start = time.perf_counter()
        if request.deadline_s is None and self._loaded:
            request.deadline_s = timeout_s
        try:
            result = await asyncio.wait_for(client.infill(request), timeout_s + 5.0 if self._loaded else LOAD_TIMEOUT_S)
        except asyncio.CancelledError:
            if background:
                self.background_cancelled += 1
            else:
                self.cancelled += 1
            raise
        except (EngineBusy, RequestCancelled) as exc:
            log.info("engine did not serve request %s: %s", request.request_id, exc)
            return None
        except ProtocolError as exc:  # our request was wrong: a bug to log, not an engine failure
            log.error("engine rejected request %s: %s", request.request_id, exc)
            return None
        except asyncio.TimeoutError:
            log.warning("engine request %s timed out after %.1fs", request.request_id, time.perf_counter() - start)
            return None
        except Exception as exc:
            # The back-off first: closing the client yields to the loop, and a request that ran
            # then found no client and no back-off, so it built a new one and failed again.
            self._fail(_explain(exc))
            await self._drop_client()
            return None
        # A background fill's latency is not what the editor waited for: the status shows the editor's.
        self._mark_ready(None if background else (time.perf_counter() - start) * 1000)
        if not background:
            self.last_result = result
        return result


    async def next_edit(self, request: "NextEditRequest", timeout_s: float = DEFAULT_TIMEOUT_S) -> "NextEditResult | None":
        """The engine's next-edit proposal, or None (logged), as `infill` answers: never raises
        for engine trouble and never waits for a model to load. NotImplementedError: this
        engine cannot propose next edits (an OpenAI FIM endpoint)."""
        if request.deadline_s is None:
            request.deadline_s = timeout_s
        return await self._side_call("next-edit", request.request_id, lambda c: c.next_edit(request), timeout_s + 5.0,
                                     warm=True)

    async def prepare(self, request: "PrepareRequest", timeout_s: float = DEFAULT_TIMEOUT_S) -> "PrepareResult | None":
        """Encode a place's context before a request comes there, or None (logged): as
        `next_edit`, never raises for engine trouble and never waits for a model to load.
        NotImplementedError: this engine keeps no context of ours (an OpenAI endpoint)."""
        return await self._side_call("prepare", request.request_id, lambda c: c.prepare(request), timeout_s)

    async def _side_call(self, what: str, request_id: str, call: Callable[["EngineClient"], Any], timeout_s: float,
                         warm: bool = False) -> Any:
        """An engine call beside the completions (next edit, prepare): its result, or None
        (logged) for engine trouble; never waits for a model to load (`warm`: starts the load)."""
        if not self.enabled or (not self._loaded and self._options.mode in MODEL_LOADING_MODES):
            if self.enabled and warm:
                self.start_warm_up()
            return None
        client = self._get_client()
        if client is None:
            return None
        try:
            return await asyncio.wait_for(call(client), timeout_s)
        except (asyncio.CancelledError, NotImplementedError):
            raise
        except (EngineBusy, RequestCancelled) as exc:
            log.info("engine did not serve %s request %s: %s", what, request_id, exc)
        except ProtocolError as exc:
            log.error("engine rejected %s request %s: %s", what, request_id, exc)
        except asyncio.TimeoutError:
            log.warning("%s request %s timed out", what, request_id)
        except Exception as exc:
            # The back-off first: closing the client yields to the loop, and a request that ran
            # then found no client and no back-off, so it built a new one and failed again.
            self._fail(_explain(exc))
            await self._drop_client()
        return None


async def _served_model(client: "EngineClient") -> str | None:
    """The model a loaded engine reports in its health (None if it does not say)."""
    try:
        model = (await asyncio.wait_for(client.health(), 10)).get("model")
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the status then names the configured model, as before
        log.info("engine health did not say its model: %s", exc)
        return None
    return model if isinstance(model, str) and model else None


def _explain(exc: BaseException) -> str:
    from dllm_engine.clients import EngineUnavailable

    if isinstance(exc, EngineUnavailable):
        return str(exc)
    if isinstance(exc, asyncio.TimeoutError):
        return "the engine did not answer in time"
    return f"{type(exc).__name__}: {exc}"
