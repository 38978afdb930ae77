"""The engine daemon: one resident engine served over HTTP (starlette + uvicorn).

Unix socket by default (mode 0600, under $XDG_RUNTIME_DIR), TCP only when
asked and then only with a bearer token. Endpoints:

- POST /v1/infill       native: several holes, diffusion parameters, per-pass stats;
                        `"stream": true` sends server-sent events (`canvas`, then `result`)
- /v1/completions, /v1/fim/completions, /v1/chat/completions, /v1/edit/completions, /v1/models:
                        OpenAI- and Inception-compatible (openai_api/; docs/api.md)
- POST /v1/score        token-by-token likelihood of existing code (for diagnostics)
- POST /v1/next_edit    the edit the user will make next (next_edit/request.py)
- POST /v1/prepare      encode a place's context before a request comes there (prepare.py)
- GET  /health          200 when ready, 503 while the model loads
- GET  /metrics         queue depth, passes/s, tokens per pass, cache hit rate (JSON, or
                         Prometheus text for a scraper's Accept header / ?format=prometheus)

A client that disconnects has its request cancelled in the engine. Bodies are
checked at the boundary (`http_schemas.py`): a bad one gets 400 naming the field,
one over `max_body_bytes` gets 413 before it is read whole, a full queue 429
with `Retry-After`; a 500 means a bug. Every error, on every route, is OpenAI's
error object (`openai_api/errors.py`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import secrets
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from . import prometheus
from .http_schemas import InfillBody, PrepareBody, ScoreBody, parse_body
from .model_config import CheckpointError
from .openai_api.errors import (BodyTimeout, BodyTooLarge, NotReady, answer_for, error_body, error_response,
                                from_exception, http_exception, internal, unauthorized)
from .openai_api.models import ServedModels
from .openai_api.next_edit_seam import serve_next_edit
from .openai_api.routes import Api, openai_routes
from .prompt_budget import TRIM_PARAM, fit_request, wants_trim
from .protocol import Hole, InfillRequest, ProtocolError, RequestCancelled
from .socket_security import UnsafeSocket, check_stale_path, ensure_private_dir

log = logging.getLogger("dllm_engine.daemon")

# One limit for every body (native and OpenAI endpoints): a 100 MB prompt once took
# the daemon from 0.7 to 10 GB. 4 MiB is far more context than any model's window.
DEFAULT_MAX_BODY_BYTES = 4 * 2**20
STOP_GRACE_S = 1  # on SIGTERM: how long in-flight requests and the engine get to stop
# A client that sends its headers and then goes silent was held for as long as it liked.
DEFAULT_BODY_TIMEOUT_S = 10.0


class EngineHost:
    """Loads the engine in the background and tracks activity for the idle exit."""

    def __init__(self, engine_factory) -> None:
        self._factory = engine_factory
        self.engine = None
        self.error: str | None = None
        self.last_activity = time.monotonic()
        self.in_flight = 0
        self._thread = threading.Thread(target=self._load, name="dllm-engine-load", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def finished(self) -> None:
        """One request in flight is answered (its response written, or its client gone)."""
        self.in_flight -= 1
        self.last_activity = time.monotonic()

    def _load(self) -> None:
        try:
            self.engine = self._factory()
        except Exception as exc:  # reported through /health, never a crash loop
            # A broken checkpoint is one line naming the file and key (its traceback with -v); anything else is a bug.
            log.error("engine failed to load: %s", exc,
                      exc_info=not isinstance(exc, CheckpointError) or log.isEnabledFor(logging.INFO))
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            # The idle clock starts once loading ends, either way: a broken daemon
            # stays up for its idle period so clients can read why from /health.
            self.last_activity = time.monotonic()


class _CountedUntilSent:
    """An ASGI response that calls `done` once it has been sent whole, or has failed to be."""

    def __init__(self, response: Response, done) -> None:
        self.response, self._done = response, done

    async def __call__(self, scope, receive, send) -> None:
        try:
            await self.response(scope, receive, send)
        finally:
            self._done()


async def _read_body(request: Request, limit: int, timeout_s: float) -> bytes:
    """The body, refused (413) as soon as it is known to pass `limit`: from the
    declared Content-Length before reading any of it, else while it streams in;
    408 when all of it has not arrived within `timeout_s`."""
    try:
        async with asyncio.timeout(timeout_s):
            return await _read_limited(request, limit)
    except TimeoutError:
        raise BodyTimeout(f"request body did not arrive within {timeout_s:g} s") from None
    except ClientDisconnect:  # gone before its body was read (a busy loop, an impatient client): not a bug
        raise RequestCancelled("client disconnected while sending the body") from None


async def _read_limited(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ProtocolError("Content-Length is not a number")
        if int(declared) > limit:
            raise BodyTooLarge(f"request body of {int(declared)} bytes is over the limit of {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"request body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _await_or_cancel(request: Request, handle) -> Any:
    """Wait for the engine; cancel the engine request if the client goes away."""
    fut = asyncio.wrap_future(handle.future)
    while True:
        done, _ = await asyncio.wait({fut}, timeout=0.05)
        if done:
            return fut.result()
        if await request.is_disconnected():
            handle.cancel()
            # The engine still fails the cancelled request; nobody awaits it now, so its exception is
            # taken here (asyncio logged "Future exception was never retrieved" per disconnect).
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())
            raise RequestCancelled("client disconnected")


def build_app(host: EngineHost, token: str | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
              body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S, models: ServedModels | None = None) -> Starlette:
    expected = f"Bearer {token}".encode() if token else b""

    async def body(request: Request, schema):
        return parse_body(schema, await _read_body(request, max_body_bytes, body_timeout_s))

    def ready_engine():
        if host.engine is None:
            raise NotReady(host.error or "model loading", failed=host.error is not None)
        return host.engine

    def authorized(request: Request) -> bool:
        if not token:
            return True
        # As bytes: compare_digest refuses a str with non-ASCII characters (a 500 once).
        given = request.headers.get("authorization", "").encode("latin-1")
        return secrets.compare_digest(given, expected)

    async def guarded(request: Request, handler) -> Response:
        if not authorized(request):
            return error_response(unauthorized())
        host.last_activity = time.monotonic()
        host.in_flight += 1
        try:
            response = await handler(request)
        except Exception as exc:  # a refusal (4xx) or, logged with a request id, a bug (500)
            response = answer_for(exc, f"{request.method} {request.url.path}")
        except BaseException:  # cancelled: no response will be sent
            host.finished()
            raise
        # A stream is still being written when its handler returns: the request counts
        # (for the idle exit) until the response's last byte is sent or the client is gone.
        return _CountedUntilSent(response, host.finished)

    async def fitted(request: Request, req: InfillRequest) -> InfillRequest:
        """Refused (400) or trimmed before the engine tokenizes it when far over the window (prompt_budget.py)."""
        engine = ready_engine()
        return await asyncio.to_thread(fit_request, req, getattr(engine, "tokenizer", None),
                                       getattr(getattr(engine, "runner", None), "window", None),
                                       wants_trim(request.query_params.get(TRIM_PARAM)))

    async def infill(request: Request) -> Response:
        req = await fitted(request, (await body(request, InfillBody)).build())
        engine = ready_engine()
        if not req.stream:
            handle = engine.submit(req)
            result = await _await_or_cancel(request, handle)
            return JSONResponse(result.to_dict())
        return _stream(request, engine, req)

    async def score(request: Request) -> Response:
        req = (await body(request, ScoreBody)).build()
        engine = ready_engine()
        result = await asyncio.to_thread(engine.score, req)
        return JSONResponse(result.to_dict())

    async def next_edit(request: Request) -> Response:
        from .next_edit.http_body import NextEditBody

        req = (await body(request, NextEditBody)).build()
        engine = ready_engine()
        cancel = threading.Event()
        try:  # the request runs in a worker thread: a client that goes away cancels it there
            result = await asyncio.to_thread(engine.next_edit, req, cancel)
        except asyncio.CancelledError:
            cancel.set()
            raise
        return JSONResponse(result.to_dict())

    async def prepare(request: Request) -> Response:
        req = (await body(request, PrepareBody)).build()
        # The same window check as /v1/infill, before the engine thread tokenizes a thing.
        fitted_hole = (await fitted(request, InfillRequest(holes=[Hole(req.prefix, req.suffix, max_tokens=1)]))).holes[0]
        req = dataclasses.replace(req, prefix=fitted_hole.prefix, suffix=fitted_hole.suffix)
        engine = ready_engine()
        cancel = threading.Event()
        work = asyncio.ensure_future(asyncio.to_thread(engine.prepare, req, cancel))
        try:  # a client that goes away (the cursor moved on) stops it before its next chunk
            while True:
                done, _ = await asyncio.wait({work}, timeout=0.05)
                if done:
                    return JSONResponse(work.result().to_dict())
                if await request.is_disconnected():
                    cancel.set()
                    work.add_done_callback(lambda f: f.cancelled() or f.exception())
                    raise RequestCancelled("client disconnected")
        except asyncio.CancelledError:
            cancel.set()
            raise

    async def health(request: Request) -> Response:
        if not authorized(request):
            return error_response(unauthorized())
        if host.engine is None:
            state = "error" if host.error else "loading"
            return JSONResponse({"status": state, "error": host.error}, status_code=503)
        return JSONResponse(host.engine.health())

    async def metrics(request: Request) -> Response:
        snapshot = ready_engine().health()
        if prometheus.wants_prometheus(request.headers.get("accept", ""), request.query_params.get("format")):
            return Response(prometheus.render(snapshot), media_type=prometheus.CONTENT_TYPE)
        return JSONResponse(snapshot)

    def endpoint(handler):
        async def run(request: Request) -> Response:
            return await guarded(request, handler)

        return run

    api = Api(body=body, ready_engine=ready_engine, wait=_await_or_cancel, models=models or ServedModels(),
              fit=fitted, next_edit=serve_next_edit)
    routes = [
        Route("/v1/infill", endpoint(infill), methods=["POST"]),
        Route("/v1/score", endpoint(score), methods=["POST"]),
        Route("/v1/next_edit", endpoint(next_edit), methods=["POST"]),
        Route("/v1/prepare", endpoint(prepare), methods=["POST"]),
        Route("/health", health, methods=["GET"]),
        Route("/metrics", endpoint(metrics), methods=["GET"]),
        *(Route(path, endpoint(handler), methods=methods) for path, handler, methods in openai_routes(api)),
    ]
    return Starlette(routes=routes, exception_handlers={HTTPException: http_exception})


def _sse(event: str, payload: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(payload)}\n\n".encode()


def _stream(request: Request, engine, req: InfillRequest) -> StreamingResponse:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    def on_event(ev) -> None:  # engine thread -> event loop
        loop.call_soon_threadsafe(queue.put_nowait, ("canvas", ev.__dict__))

    handle = engine.submit(req, on_event=on_event)
    handle.future.add_done_callback(lambda f: loop.call_soon_threadsafe(queue.put_nowait, ("done", None)))

    async def events():
        try:
            while True:
                kind, payload = await queue.get()
                if kind == "canvas":
                    yield _sse("canvas", payload)
                    continue
                exc = handle.future.exception()
                if exc is None:
                    yield _sse("result", handle.future.result().to_dict())
                else:
                    err = from_exception(exc) or internal(exc, "streamed infill")
                    yield _sse("error", {**error_body(err), "status": err.status})
                return
        finally:
            if not handle.future.done():
                handle.cancel()  # the client went away mid-stream

    return StreamingResponse(events(), media_type="text/event-stream")


def bind_unix_socket(path: Path) -> socket.socket:
    """Bind `path` with mode 0600 from the start (no window where others could connect),
    in a folder that is the user's alone (socket_security.py)."""
    try:
        ensure_private_dir(path.parent)
        check_stale_path(path)  # only a socket is ever unlinked: a file given as --socket is refused
    except UnsafeSocket as exc:
        raise SystemExit(f"dllm-lsp engine serve: {exc}") from None
    if os.path.lexists(path):
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # a stale socket from a daemon that died
        else:
            raise SystemExit(f"an engine daemon is already listening on {path}")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(128)
    return sock


def serve(engine_factory, socket_path: Path | None, host: str | None, port: int | None,
          token: str | None, idle_exit_s: float | None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
          header_timeout_s: float | None = None, models: ServedModels | None = None) -> int:
    import uvicorn

    from .header_deadline import DEFAULT_HEADER_TIMEOUT_S, header_deadline_protocol

    if socket_path is None and not token:
        raise SystemExit("refusing to listen on TCP without --token (or DLLM_LSP_TOKEN)")
    engine_host = EngineHost(engine_factory)
    engine_host.start()
    app = build_app(engine_host, token, max_body_bytes, models=models)
    sockets = [bind_unix_socket(socket_path)] if socket_path is not None else None
    # SIGTERM must stop the daemon in a second or two: in-flight requests get STOP_GRACE_S
    # to finish (uvicorn waits for them forever by default), then they are cancelled.
    config = uvicorn.Config(app, host=host or "127.0.0.1", port=port or 8765, log_level="warning", lifespan="off",
                            timeout_graceful_shutdown=STOP_GRACE_S,
                            http=header_deadline_protocol(header_timeout_s or DEFAULT_HEADER_TIMEOUT_S))
    server = uvicorn.Server(config)

    async def watch_idle():
        while not server.should_exit:
            await asyncio.sleep(0.5)
            idle = time.monotonic() - engine_host.last_activity
            loading = engine_host.engine is None and engine_host.error is None
            if idle_exit_s and not loading and engine_host.in_flight == 0 and idle > idle_exit_s:
                log.info("idle for %.0fs, exiting", idle)
                server.should_exit = True

    async def main():
        watcher = asyncio.create_task(watch_idle())
        try:
            await server.serve(sockets=sockets)
        finally:
            watcher.cancel()
            if engine_host.engine is not None:
                # The engine thread stops between passes; it is a daemon thread, so a long
                # pass is not waited for (Engine.shutdown alone joins it for up to 10 s).
                stopper = threading.Thread(target=engine_host.engine.shutdown, daemon=True)
                stopper.start()
                stopper.join(STOP_GRACE_S)

    # uvicorn re-raises the signal it caught once it has stopped, which under the default
    # handler kills the process before the socket is removed: a no-op handler instead,
    # so a SIGTERM ends here, cleanly, with exit status 0.
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        asyncio.run(main())
    finally:
        signal.signal(signal.SIGTERM, previous)
    if socket_path is not None and socket_path.is_socket():  # ours; never a file put there since
        socket_path.unlink()
    return 1 if engine_host.error else 0  # a daemon that never loaded its model failed
