"""OpenAI's error object on every endpoint: `{"error": {"message", "type", "param", "code"}}`.

The SDKs (openai-python, openai-node, LiteLLM) pick their exception class from the
HTTP status and show `error.message`; `param` names the offending field and `code`
is what a program can branch on (our own `dllm_engine.clients` reads it too).
One table maps our exceptions to (status, type, code), so every route answers alike.
"""

from __future__ import annotations

import logging
import uuid

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

from ..protocol import EngineBusy, ProtocolError, RequestCancelled

log = logging.getLogger("dllm_engine.daemon")

RETRY_AFTER_S = 1  # what a full queue or a loading model tells the client to wait


class ApiError(Exception):
    """An answer that is an error, with everything its body needs."""

    def __init__(self, status: int, message: str, type: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type, code, param


class BodyTooLarge(ProtocolError):
    """A body over the daemon's limit (HTTP 413)."""


class BodyTimeout(ProtocolError):
    """A body that did not arrive in time (HTTP 408)."""


class NotReady(RuntimeError):
    """The model is still loading, or failed to (HTTP 503)."""

    def __init__(self, message: str, failed: bool = False) -> None:
        super().__init__(message)
        self.failed = failed


def unauthorized() -> ApiError:
    # OpenAI's own shape for a bad key: the SDKs raise AuthenticationError on the 401.
    return ApiError(401, "missing or wrong bearer token (send Authorization: Bearer <token>)",
                    code="invalid_api_key")


def model_not_found(name: str, served: list[str]) -> ApiError:
    return ApiError(404, f"model {name!r} is not served here; this daemon serves {', '.join(served)}",
                    code="model_not_found", param="model")


def from_exception(exc: BaseException) -> ApiError | None:
    """The API error for an exception a request may raise; None for a bug (a 500)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, BodyTooLarge):
        return ApiError(413, str(exc), code="request_too_large")
    if isinstance(exc, BodyTimeout):
        return ApiError(408, str(exc), code="request_timeout")
    if isinstance(exc, ProtocolError):
        return ApiError(400, str(exc), param=getattr(exc, "param", None), code="invalid_value")
    if isinstance(exc, EngineBusy):
        return ApiError(429, str(exc), type="rate_limit_error", code="engine_busy")
    if isinstance(exc, NotReady):
        return ApiError(503, str(exc), type="server_error", code="model_load_failed" if exc.failed else "model_loading")
    if isinstance(exc, RequestCancelled):
        return ApiError(499, str(exc), type="server_error", code="request_cancelled")
    return None


def internal(exc: BaseException, where: str) -> ApiError:
    """A bug: logged with its traceback under a request id that the body repeats."""
    request_id = uuid.uuid4().hex[:16]
    log.error("%s failed (request id %s)", where, request_id, exc_info=exc)
    return ApiError(500, f"internal error (request id {request_id}): {type(exc).__name__}: {exc}",
                    type="server_error", code="internal_error")


def error_body(err: ApiError) -> dict:
    return {"error": {"message": err.message, "type": err.type, "param": err.param, "code": err.code}}


def error_response(err: ApiError) -> JSONResponse:
    headers = {"Retry-After": str(RETRY_AFTER_S)} if err.status in (429, 503) else None
    return JSONResponse(error_body(err), status_code=err.status, headers=headers)


def answer_for(exc: BaseException, where: str) -> JSONResponse:
    return error_response(from_exception(exc) or internal(exc, where))


async def http_exception(request: Request, exc: HTTPException) -> JSONResponse:
    """Starlette's own 404 (unknown route) and 405 (wrong method), in OpenAI's shape."""
    code = {404: "unknown_url", 405: "method_not_allowed"}.get(exc.status_code)
    message = (f"no route {request.method} {request.url.path}" if exc.status_code == 404
               else f"{request.method} is not allowed on {request.url.path}" if exc.status_code == 405
               else str(exc.detail))
    response = error_response(ApiError(exc.status_code, message, code=code))
    if exc.headers:
        response.headers.update(exc.headers)
    return response
