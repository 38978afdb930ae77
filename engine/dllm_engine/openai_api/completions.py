"""POST /v1/completions (and Inception's /v1/fim/completions): fill-in-the-middle, OpenAI's shape.

Each prompt x `n` is one hole of a single engine request, so the `n` fills of a
prompt are denoised together in one batch; hole `i` is choice `i` (OpenAI's order:
all choices of the first prompt, then the second's). A hole's sampler is seeded
with (`seed`, its index), so at temperature > 0 the `n` fills differ and are
reproducible; at temperature 0 (greedy, the default) they are all the same fill.
"""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse

from ..protocol import DiffusionParams, Hole, HoleResult, InfillRequest, InfillResult, ProtocolError, SettledText
from .errors import error_body, from_exception, internal
from .fill_session import FillSession, Finished
from .schemas import CompletionBody
from .streaming import DONE, FillStream, sse

MAX_HOLES = 256  # the engine's limit per request
# Continue's Inception provider sends this as the suffix when there is none (core/llm/llms/Inception.ts):
# as text it would be context; it means "nothing after the hole".
EMPTY_SUFFIX_MARKERS = ("<|endoftext|>",)


def sampling_params(body) -> DiffusionParams:
    d = DiffusionParams
    return DiffusionParams(
        temperature=d.temperature if body.temperature is None else body.temperature,
        top_p=d.top_p if body.top_p is None else body.top_p,
        seed=d.seed if body.seed is None else body.seed,
        remask_below=0.0,  # what is streamed must stay: no committed token is ever re-masked here
        candidates=getattr(body, "best_of", None) or 1,  # completions only: chat has no best_of
    )


def completion_request(body: CompletionBody) -> InfillRequest:
    n = body.choices_per_prompt
    if len(body.prompts) * n > MAX_HOLES:
        raise ProtocolError(f"n x prompts is {len(body.prompts) * n}; at most {MAX_HOLES} fills per request")
    suffix = "" if (body.suffix or "").strip() in EMPTY_SUFFIX_MARKERS else body.suffix or ""
    holes = [Hole(prefix=p, suffix=suffix, stop=body.stops, max_tokens=body.fill_tokens)
             for p in body.prompts for _ in range(n)]
    req = InfillRequest(holes=holes, params=sampling_params(body))
    req.validate()
    return req


def finish_reason(hole: HoleResult) -> str:
    # "length": the fill used all of max_tokens without ending; a stop string or the model's end is "stop".
    return "length" if hole.finish_reason == "max_tokens" else "stop"


def usage(result: InfillResult, per_prompt: int) -> dict:
    # The engine counts context tokens per hole; the n holes of a prompt share one prompt.
    prompt = result.context_tokens // max(1, per_prompt)
    completion = sum(h.tokens for h in result.holes)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _envelope(req: InfillRequest, name: str, created: int) -> dict:
    return {"id": f"cmpl-{req.request_id}", "object": "text_completion", "created": created, "model": name}


def completion_payload(req: InfillRequest, result: InfillResult, name: str, per_prompt: int) -> dict:
    return {
        **_envelope(req, name, int(time.time())),
        "choices": [{"index": i, "text": h.text, "logprobs": None, "finish_reason": finish_reason(h)}
                    for i, h in enumerate(result.holes)],
        "usage": usage(result, per_prompt),
    }


async def create_completion(request: Request, api) -> JSONResponse | StreamingResponse:
    body = await api.body(request, CompletionBody)
    engine = api.ready_engine()
    name = api.models.resolve(engine, body.model)
    req = completion_request(body)
    if api.fit is not None:
        req = await api.fit(request, req)
    if not body.stream:
        result = await api.wait(request, engine.submit(req))
        return JSONResponse(completion_payload(req, result, name, body.choices_per_prompt))
    session = FillSession(engine, req)
    await session.start(request)
    return StreamingResponse(_chunks(session, req, body, name), media_type="text/event-stream")


async def _chunks(session: FillSession, req: InfillRequest, body: CompletionBody, name: str):
    created = int(time.time())
    streams = [FillStream.for_hole(h) for h in req.holes]
    extra = {"usage": None} if body.include_usage else {}

    def chunk(index: int, text: str, reason: str | None) -> bytes:
        return sse({**_envelope(req, name, created), **extra,
                    "choices": [{"index": index, "text": text, "logprobs": None, "finish_reason": reason}]})

    try:
        async for item in session.events():
            if isinstance(item, SettledText):
                delta = streams[item.hole].settled(item.text)
                if delta:
                    yield chunk(item.hole, delta, None)
                continue
            if not isinstance(item, Finished):
                continue
            if item.error is not None:  # the headers are sent: the error goes in the stream, as OpenAI does
                err = from_exception(item.error) or internal(item.error, "streamed completion")
                yield sse(error_body(err))
                return
            for i, hole in enumerate(item.result.holes):
                yield chunk(i, streams[i].final(hole.text), finish_reason(hole))
            if body.include_usage:
                yield sse({**_envelope(req, name, created), "choices": [],
                           "usage": usage(item.result, body.choices_per_prompt)})
            yield DONE
    finally:
        session.close()  # a client that went away mid-stream: the engine drops the request

