"""The OpenAI- and Inception-compatible routes, as the daemon mounts them.

The daemon owns authentication, body reading and the engine's lifecycle; it hands
each route an `Api` with what it needs, so this package holds the API's shape and
nothing of the daemon's plumbing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse

from .chat import create_chat_completion
from .completions import create_completion
from .edit import create_edit_completion
from .models import ServedModels


@dataclass
class Api:
    body: Callable[[Request, type], Awaitable[Any]]  # read, size-check and validate a body
    ready_engine: Callable[[], Any]  # the engine, or NotReady (503)
    wait: Callable[[Request, Any], Awaitable[Any]]  # a handle's result; cancelled if the client goes away
    models: ServedModels
    # The next-edit engine request (issue 14): (request, engine, NextEditPrompt, EditBody) -> the
    # rewritten editable region. None until it exists: the next-edit format is then a 501.
    next_edit: Callable[..., Awaitable[str]] | None = None
    # A fill request refused (400) or trimmed before it is tokenized when its text is far over
    # the model's window (the daemon's prompt_budget check); None: sent as it is.
    fit: Callable[[Request, Any], Awaitable[Any]] | None = None


def openai_routes(api: Api) -> list[tuple[str, Callable, list[str]]]:
    async def list_models(request: Request) -> JSONResponse:
        return JSONResponse(api.models.listing(api.ready_engine()))

    async def get_model(request: Request) -> JSONResponse:
        engine = api.ready_engine()
        name = api.models.resolve(engine, request.path_params["model"])
        return JSONResponse(api.models.card(engine, name))

    async def completions(request: Request):
        return await create_completion(request, api)

    async def chat(request: Request):
        return await create_chat_completion(request, api)

    async def edit(request: Request):
        return await create_edit_completion(request, api)

    return [
        ("/v1/models", list_models, ["GET"]),
        # Hub ids hold a slash (`inclusionAI/LLaDA-8B`): the path converter keeps it.
        ("/v1/models/{model:path}", get_model, ["GET"]),
        ("/v1/completions", completions, ["POST"]),
        ("/v1/fim/completions", completions, ["POST"]),  # Inception's FIM route: the same body
        ("/v1/chat/completions", chat, ["POST"]),
        ("/v1/edit/completions", edit, ["POST"]),
        # Continue's Inception provider sends apply-edit here (core/llm/llms/Inception.ts).
        ("/v1/apply/completions", edit, ["POST"]),
    ]
