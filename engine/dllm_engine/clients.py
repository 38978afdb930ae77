"""Engine clients: one async interface, four transports.

- `InProcessClient`: the engine runs in this process (imports torch lazily,
  on first use, in a worker thread so an asyncio loop never blocks on it).
- `DaemonClient`: a shared local daemon over a Unix socket (or TCP with a
  bearer token), started on demand like gopls `-remote=auto`.
- `OpenAIFimClient`: any OpenAI-compatible `/v1/completions` endpoint that
  takes `prompt` + `suffix` (fill-in-the-middle).

This module imports neither torch nor pygls: the language server uses it.
"""

from __future__ import annotations

import abc
import asyncio
import hashlib
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import httpx

from .peer_transport import peer_checked_transport
from .protocol import (
    HINT_FIELDS,
    CanvasEvent,
    EngineBusy,
    HoleResult,
    InfillRequest,
    InfillResult,
    ProtocolError,
    RequestCancelled,
    ScoreRequest,
    ScoreResult,
)
from .socket_security import UnsafeSocket, check_dir, ensure_private_dir

if TYPE_CHECKING:
    from .next_edit.request import NextEditRequest, NextEditResult
    from .prepare import PrepareRequest, PrepareResult

EventCallback = Callable[[CanvasEvent], None]
log = logging.getLogger("dllm_engine.clients")
# How a daemon's request schema (http_schemas.py, pydantic) refuses a field it does not know.
_REFUSED_HOLE_FIELD = re.compile(r"holes\.\d+\.(\w+): Extra inputs are not permitted")


class EngineUnavailable(RuntimeError):
    """The engine cannot be reached or failed to start; the message says why."""


class UnsafeDaemonSocket(EngineUnavailable, UnsafeSocket):
    """The socket's folder or the daemon behind it is not the user's: nothing is sent."""


class EngineClient(abc.ABC):
    """What the server and the batch command need from an engine."""

    @abc.abstractmethod
    async def infill(self, request: InfillRequest, on_event: EventCallback | None = None) -> InfillResult:
        """Fill the request's holes. Cancelling the awaiting task cancels the request."""

    @abc.abstractmethod
    async def health(self) -> dict[str, Any]:
        """Engine state: {"status": "ok"|"loading"|..., "model": ..., ...}."""

    async def score(self, request: ScoreRequest) -> ScoreResult:
        """Token likelihoods of existing code; engines without it raise NotImplementedError."""
        raise NotImplementedError(f"{type(self).__name__} cannot score tokens")

    async def next_edit(self, request: "NextEditRequest") -> "NextEditResult":
        """The edit the user will make next (next_edit/); engines without it raise NotImplementedError."""
        raise NotImplementedError(f"{type(self).__name__} cannot propose next edits")

    async def prepare(self, request: "PrepareRequest") -> "PrepareResult":
        """Encode a place's context before a request comes there (prepare.py); engines
        without a context cache of ours raise NotImplementedError. Cancelling stops it."""
        raise NotImplementedError(f"{type(self).__name__} cannot prepare contexts")

    async def close(self) -> None:
        return None


def default_socket_path(model: str | None = None, device: str = "auto", dtype: str = "auto") -> Path:
    """The socket of the daemon serving `model` with these settings: one daemon per model.

    One path per user made two sessions configured with different models share the first
    one's daemon, and one of them silently got the other's model. The default model on
    automatic device and dtype keeps `engine.sock`; anything else gets its own
    `engine-<name>-<hash>.sock` (`socket_name`)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) if runtime and Path(runtime).is_dir() else Path("/tmp") / f"dllm-lsp-{os.getuid()}"
    return base / "dllm-lsp" / socket_name(model, device, dtype)


# What the engine loads when no model is named (checkpoint.MODEL_ENV: not imported, it pulls in torch).
_MODEL_ENV = "DLLM_LSP_MODEL"


def socket_name(model: str | None, device: str = "auto", dtype: str = "auto") -> str:
    """`engine.sock` for the default model on auto/auto, else `engine-<name>-<hash>.sock`: the
    name for people reading the folder, the hash of the model (a folder by its absolute path,
    as the same folder named from another directory is the same model) with the settings
    that change its answers, so that different ones never meet. Short enough for a Unix
    socket path (108 bytes)."""
    name = model or os.environ.get(_MODEL_ENV) or "default"
    folder = Path(name).expanduser()
    identity = str(folder.resolve()) if folder.is_dir() else name
    if (identity, device, dtype) == ("default", "auto", "auto"):
        return "engine.sock"
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", folder.name or name).strip("-.")[:24] or "model"
    digest = hashlib.sha256("\0".join((identity, device, dtype)).encode()).hexdigest()[:12]
    return f"engine-{readable}-{digest}.sock"


# ---------------------------------------------------------------- in-process


class InProcessClient(EngineClient):
    """Runs the engine in this process; the model loads on first use."""

    def __init__(self, **engine_config: Any) -> None:
        self._config = engine_config
        self._engine = None
        self._load_lock = asyncio.Lock()
        # Scores and next edits block while the engine thread runs their forwards
        # (engine_calls.py): each waits on one thread of its own, not in asyncio's pool, so a
        # burst of them holds two threads, not cpu_count + 4 (and should anything of torch's
        # ever run on the waiting thread, its per-thread state is kept once: issue 16, defect 8).
        self._threads: dict[str, ThreadPoolExecutor] = {}

    async def _get_engine(self):
        async with self._load_lock:
            if self._engine is None:
                self._engine = await asyncio.to_thread(self._build)
        return self._engine

    def _build(self):
        from .engine import Engine, EngineConfig  # torch is imported here, not at module load

        return Engine(EngineConfig(**self._config))

    async def infill(self, request: InfillRequest, on_event: EventCallback | None = None) -> InfillResult:
        engine = await self._get_engine()
        handle = engine.submit(request, on_event=on_event)
        try:
            return await asyncio.wrap_future(handle.future)
        except asyncio.CancelledError:
            handle.cancel()
            raise

    def _on_thread(self, name: str, fn: Callable, *args: Any) -> "asyncio.Future":
        if name not in self._threads:
            self._threads[name] = ThreadPoolExecutor(1, thread_name_prefix=f"dllm-{name}")
        return asyncio.get_running_loop().run_in_executor(self._threads[name], fn, *args)

    async def score(self, request: ScoreRequest) -> ScoreResult:
        engine = await self._get_engine()
        return await self._on_thread("score", engine.score, request)

    async def next_edit(self, request: "NextEditRequest") -> "NextEditResult":
        return await self._cancellable("next-edit", "next_edit", request)

    async def prepare(self, request: "PrepareRequest") -> "PrepareResult":
        return await self._cancellable("prepare", "prepare", request)

    async def _cancellable(self, thread: str, method: str, request: Any) -> Any:
        """engine.<method>(request, cancel) on its own thread; cancelling the await sets
        `cancel`, which the worker reads between its engine calls."""
        engine = await self._get_engine()
        cancel = threading.Event()
        try:
            return await self._on_thread(thread, getattr(engine, method), request, cancel)
        except asyncio.CancelledError:
            cancel.set()
            raise

    async def health(self) -> dict[str, Any]:
        if self._engine is None:
            return {"status": "not_loaded", "model": self._config.get("model", "default")}
        return self._engine.health()

    async def drop_caches(self) -> None:
        """Forget the engine's cached contexts (benchmarks that start each run cold)."""
        if self._engine is not None:
            await asyncio.to_thread(self._engine.drop_caches)

    async def close(self) -> None:
        for thread in self._threads.values():
            thread.shutdown(wait=False, cancel_futures=True)
        self._threads.clear()
        if self._engine is not None:
            self._engine.shutdown()
            self._engine = None


# -------------------------------------------------------------------- daemon


class DaemonClient(EngineClient):
    """Talks to `dllm-lsp engine serve` over a Unix socket or TCP.

    With `spawn=True` and no daemon listening on the socket, it starts one
    (detached, exiting after `idle_exit_s` without requests) and waits for it.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str] | None = None,
        url: str | None = None,
        token: str | None = None,
        spawn: bool = False,
        model: str | None = None,
        idle_exit_s: float = 600.0,
        timeout_s: float = 120.0,
        start_timeout_s: float = 120.0,
    ) -> None:
        self.socket_path = Path(socket_path) if socket_path else (None if url else default_socket_path(model))
        self.url = url.rstrip("/") if url else "http://dllm-engine"
        self.token = token
        self.spawn = spawn
        self.model = model
        self.idle_exit_s = idle_exit_s
        self.start_timeout_s = start_timeout_s
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        transport = peer_checked_transport(str(self.socket_path), UnsafeDaemonSocket) if self.socket_path else None
        self._http = httpx.AsyncClient(
            base_url=self.url, transport=transport, headers=headers, timeout=httpx.Timeout(timeout_s, connect=5.0)
        )
        self._spawned: subprocess.Popen | None = None
        self._spawn_lock = asyncio.Lock()
        self._unknown_hints: set[str] = set()  # hint fields this daemon refused (infill)

    def _check_socket(self) -> None:
        """Before any connection: the socket's folder must be the user's alone (socket_security.py)."""
        if self.socket_path is None:
            return
        try:
            if self.spawn:
                ensure_private_dir(self.socket_path.parent)
            elif self.socket_path.parent.exists():
                check_dir(self.socket_path.parent)
        except UnsafeSocket as exc:
            raise UnsafeDaemonSocket(str(exc)) from None

    async def _ensure_running(self) -> None:
        self._check_socket()
        if not self.spawn or self.socket_path is None:
            return
        async with self._spawn_lock:
            state = await self._ping()
            if state == "ready":
                return
            if state == "absent":
                self._spawned = spawn_daemon(self.socket_path, self.model, self.idle_exit_s)
            # else: a daemon is up and still loading its model; wait for it, never start a second one
            deadline = time.monotonic() + self.start_timeout_s
            while time.monotonic() < deadline:
                state = await self._ping()
                if state == "ready":
                    return
                if state == "error":
                    raise EngineUnavailable(f"engine daemon on {self.socket_path} failed to load its model: "
                                            f"{(await self._health_payload()).get('error')}")
                if self._spawned is not None and self._spawned.poll() is not None and state == "absent":
                    raise EngineUnavailable(
                        f"engine daemon exited with code {self._spawned.returncode}"
                        f"{_log_tail(daemon_log_path(self.socket_path))}; "
                        f"run `dllm-lsp engine serve --socket {self.socket_path}` to see more"
                    )
                await asyncio.sleep(0.1)
            raise EngineUnavailable(f"engine daemon did not answer on {self.socket_path} in {self.start_timeout_s:.0f}s")

    async def _ping(self) -> str:
        """"ready", "loading", "error" (the daemon could not load its model) or "absent"."""
        try:
            r = await self._http.get("/health", timeout=2.0)
        except httpx.HTTPError:
            return "absent"
        if r.status_code == 200:
            return "ready"
        try:
            return "error" if r.json().get("status") == "error" else "loading"
        except ValueError:
            return "loading"

    async def _health_payload(self) -> dict[str, Any]:
        try:
            return (await self._http.get("/health", timeout=2.0)).json()
        except (httpx.HTTPError, ValueError):
            return {}

    async def infill(self, request: InfillRequest, on_event: EventCallback | None = None) -> InfillResult:
        await self._ensure_running()
        try:
            return await self._infill(request.to_wire(self._unknown_hints), on_event)
        except ProtocolError as exc:
            # A daemon older than a hint field (protocol.HINT_FIELDS: it changes only how soon the
            # answer comes) refuses it: say so once, and leave it out from now on.
            refused = (set(_REFUSED_HOLE_FIELD.findall(str(exc))) & HINT_FIELDS) - self._unknown_hints
            if not refused:
                raise
            log.warning("the engine at %s predates hole field(s) %s; requests go without them "
                        "(upgrade it to use them)", self.socket_path or self.url, ", ".join(sorted(refused)))
            self._unknown_hints |= refused
            return await self._infill(request.to_wire(self._unknown_hints), on_event)

    async def _infill(self, body: dict[str, Any], on_event: EventCallback | None) -> InfillResult:
        try:
            if on_event is None:
                body["stream"] = False
                r = await self._http.post("/v1/infill", json=body)
                return InfillResult.from_dict(_checked(r))
            body["stream"] = True
            async with self._http.stream("POST", "/v1/infill", json=body) as r:
                if r.status_code != 200:
                    await r.aread()
                    _checked(r)
                return await _read_sse(r, on_event)
        except httpx.TransportError as exc:
            raise EngineUnavailable(f"engine at {self.socket_path or self.url} unreachable: {exc}") from exc

    async def _post_checked(self, path: str, body: dict[str, Any], optional: bool = False) -> dict[str, Any]:
        """POST one JSON request (starting the daemon if needed) and return its checked body.
        `optional`: a route older daemons lack; their 404 raises NotImplementedError."""
        await self._ensure_running()
        try:
            r = await self._http.post(path, json=body)
        except httpx.TransportError as exc:
            raise EngineUnavailable(f"engine at {self.socket_path or self.url} unreachable: {exc}") from exc
        if optional and r.status_code == 404:
            raise NotImplementedError(f"the engine at {self.socket_path or self.url} has no {path}")
        return _checked(r)

    async def score(self, request: ScoreRequest) -> ScoreResult:
        return ScoreResult.from_dict(await self._post_checked("/v1/score", request.to_dict()))

    async def next_edit(self, request: "NextEditRequest") -> "NextEditResult":
        from .next_edit.request import NextEditResult

        return NextEditResult.from_dict(await self._post_checked("/v1/next_edit", request.to_dict()))

    async def prepare(self, request: "PrepareRequest") -> "PrepareResult":
        from .prepare import PrepareResult

        return PrepareResult.from_dict(await self._post_checked("/v1/prepare", request.to_dict(), optional=True))

    async def health(self) -> dict[str, Any]:
        self._check_socket()
        try:
            r = await self._http.get("/health", timeout=5.0)
            return _checked(r)
        except httpx.TransportError as exc:
            raise EngineUnavailable(f"engine at {self.socket_path or self.url} unreachable: {exc}") from exc

    async def close(self) -> None:
        await self._http.aclose()


def daemon_log_path(socket_path: Path) -> Path:
    """Where a spawned daemon's stdout and stderr go (next to its socket)."""
    return socket_path.with_suffix(".log")


def _log_tail(path: Path, lines: int = 3) -> str:
    """The last lines of a spawned daemon's log, to say why it exited."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    tail = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return (": " + " | ".join(tail)) if tail else ""


def spawn_daemon(socket_path: Path, model: str | None, idle_exit_s: float) -> subprocess.Popen:
    """Start a detached engine daemon that outlives this process until idle."""
    cmd = [sys.executable, "-m", "dllm_lsp", "engine", "serve", "--socket", str(socket_path),
           "--idle-exit", str(idle_exit_s)]
    if model:
        cmd += ["--model", model]
    log_path = daemon_log_path(socket_path)
    ensure_private_dir(socket_path.parent)
    log = open(log_path, "ab")
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)


async def _read_sse(response: httpx.Response, on_event: EventCallback) -> InfillResult:
    event, data = None, []
    async for line in response.aiter_lines():
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and event is not None:
            payload = json.loads("\n".join(data))
            if event == "canvas":
                on_event(CanvasEvent(**payload))
            elif event == "result":
                return InfillResult.from_dict(payload)
            elif event == "error":
                _raise_error(payload.get("status", 500), *_error_parts(payload))
            event, data = None, []
    raise EngineUnavailable("engine closed the stream without a result")


def _checked(r: httpx.Response) -> dict[str, Any]:
    try:
        payload = r.json()
    except ValueError:
        payload = {"error": r.text}
    if not isinstance(payload, dict):
        payload = {"error": str(payload)}
    if r.status_code >= 400:
        message, code = _error_parts(payload)
        _raise_error(r.status_code, message or r.text or f"HTTP {r.status_code}", code)
    return payload


def _error_parts(payload: dict[str, Any]) -> tuple[str, str | None]:
    """(message, code) from OpenAI's error object `{"error": {"message", "code", ...}}`, which
    the daemon sends, or from the bare `{"error": "text"}` of older daemons and other servers."""
    error = payload.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or ""), error.get("code")
    return str(error or payload.get("status") or ""), None


def _raise_error(status: int, message: str, code: str | None = None):
    if status == 503 and (code == "model_loading" or message in ("loading", "model loading")):
        raise EngineUnavailable("engine is still loading its model")
    if status == 429 or status == 503 and "busy" in message:
        raise EngineBusy(message)
    if status == 499:
        raise RequestCancelled(message)
    if 400 <= status < 500:
        raise ProtocolError(message)
    raise EngineUnavailable(f"engine error {status}: {message}")


# ------------------------------------------------------------- OpenAI FIM


class OpenAIFimClient(EngineClient):
    """Any OpenAI-compatible completions endpoint with fill-in-the-middle (`suffix`).

    One HTTP request per hole, sent concurrently; diffusion statistics are
    unknown there, so passes are reported as 0.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 30.0) -> None:
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s)

    async def _one(self, request: InfillRequest, i: int) -> HoleResult:
        hole = request.holes[i]
        body = {
            "model": self.model,
            "prompt": hole.prefix,
            "suffix": hole.suffix,
            "max_tokens": hole.max_tokens,
            "temperature": request.params.temperature,
        }
        if hole.stop:
            body["stop"] = list(hole.stop)
        try:
            r = await self._http.post("/v1/completions", json=body)
        except httpx.TransportError as exc:
            raise EngineUnavailable(f"FIM endpoint unreachable: {exc}") from exc
        payload = _checked(r)
        choice = payload["choices"][0]
        reason = "max_tokens" if choice.get("finish_reason") == "length" else "end"
        tokens = int(payload.get("usage", {}).get("completion_tokens", 0))
        return HoleResult(text=choice.get("text", ""), finish_reason=reason, passes=0, tokens=tokens)

    async def infill(self, request: InfillRequest, on_event: EventCallback | None = None) -> InfillResult:
        start = time.perf_counter()
        holes = await asyncio.gather(*(self._one(request, i) for i in range(len(request.holes))))
        return InfillResult(request_id=request.request_id, holes=list(holes), model=self.model,
                            elapsed_ms=(time.perf_counter() - start) * 1000)

    async def health(self) -> dict[str, Any]:
        return {"status": "ok", "model": self.model, "kind": "openai-fim"}

    async def close(self) -> None:
        await self._http.aclose()
