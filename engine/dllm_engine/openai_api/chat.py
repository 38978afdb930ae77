"""POST /v1/chat/completions, for checkpoints that carry a chat template.

The messages are rendered by the checkpoint's template (chat_template.py) into a
prompt ending in the assistant's turn, and the reply is a hole after it: denoised
like any fill, ended by the model's end-of-turn token (an end id of the family).
Streaming sends OpenAI's `chat.completion.chunk`s of settled text, as
/v1/completions does; `diffusing: true` (Inception's name) instead sends every
intermediate canvas whole, masked slots shown as U+2591, each chunk's
`delta.content` replacing the previous one, so a UI can show the reply settle.
Tool calls and JSON output are refused (schemas.py).
"""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse

from ..protocol import CanvasEvent, Hole, InfillRequest, ProtocolError, SettledText
from .chat_template import find_chat_template, render_chat
from .completions import MAX_HOLES, finish_reason, sampling_params, usage
from .errors import error_body, from_exception, internal
from .fill_session import FillSession, Finished
from .schemas import ChatBody
from .streaming import DONE, FillStream, sse


def chat_request(body: ChatBody, folder, template: str) -> InfillRequest:
    try:
        messages = [{"role": m.role, "content": m.text()} for m in body.messages]
    except ValueError as exc:
        raise ProtocolError(f"messages: {exc}") from None
    prompt = render_chat(folder, template, messages)
    n = body.choices_per_prompt
    if n > MAX_HOLES:
        raise ProtocolError(f"n: at most {MAX_HOLES}")
    holes = [Hole(prefix=prompt, stop=body.stops, max_tokens=body.fill_tokens) for _ in range(n)]
    req = InfillRequest(holes=holes, params=sampling_params(body), stream=bool(body.diffusing))
    req.validate()
    return req


async def create_chat_completion(request: Request, api):
    body = await api.body(request, ChatBody)
    engine = api.ready_engine()
    name = api.models.resolve(engine, body.model)
    template = find_chat_template(engine.loaded.path)
    if template is None:
        raise ProtocolError(f"model {name!r} has no chat template (no chat_template in its tokenizer_config.json "
                            "or chat_template.jinja): it is a base model; use /v1/completions")
    req = chat_request(body, engine.loaded.path, template)
    if not body.stream:
        result = await api.wait(request, engine.submit(req))
        return JSONResponse({
            **_envelope(req, name, "chat.completion"),
            "choices": [{"index": i, "message": {"role": "assistant", "content": h.text}, "logprobs": None,
                         "finish_reason": finish_reason(h)} for i, h in enumerate(result.holes)],
            "usage": usage(result, body.choices_per_prompt),
        })
    session = FillSession(engine, req, canvases=bool(body.diffusing))
    await session.start(request)
    return StreamingResponse(_chunks(session, req, body, name), media_type="text/event-stream")


def _envelope(req: InfillRequest, name: str, kind: str) -> dict:
    return {"id": f"chatcmpl-{req.request_id}", "object": kind, "created": int(time.time()), "model": name}


async def _chunks(session: FillSession, req: InfillRequest, body: ChatBody, name: str):
    streams = [FillStream.for_hole(h) for h in req.holes]
    extra = {"usage": None} if body.include_usage else {}

    def chunk(index: int, delta: dict, reason: str | None = None) -> bytes:
        return sse({**_envelope(req, name, "chat.completion.chunk"), **extra,
                    "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": reason}]})

    try:
        for i in range(len(req.holes)):  # OpenAI's first chunk of a choice names the role
            yield chunk(i, {"role": "assistant", "content": ""})
        async for item in session.events():
            if isinstance(item, CanvasEvent):  # diffusing: the whole canvas, replacing the last one
                yield chunk(item.hole, {"content": item.text})
            elif isinstance(item, SettledText):
                delta = streams[item.hole].settled(item.text)
                if delta:
                    yield chunk(item.hole, {"content": delta})
            elif isinstance(item, Finished):
                if item.error is not None:
                    yield sse(error_body(from_exception(item.error) or internal(item.error, "streamed chat")))
                    return
                for i, hole in enumerate(item.result.holes):
                    text = hole.text if body.diffusing else streams[i].final(hole.text)
                    yield chunk(i, {"content": text} if text else {}, finish_reason(hole))
                if body.include_usage:
                    yield sse({**_envelope(req, name, "chat.completion.chunk"), "choices": [],
                               "usage": usage(item.result, body.choices_per_prompt)})
                yield DONE
    finally:
        session.close()

