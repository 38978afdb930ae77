"""POST /v1/edit/completions: Inception's edit endpoint, "apply edit" and "next edit".

The body is a chat body with one user message in one of Mercury Edit's tagged
formats (Inception's docs; Continue's Mercury providers write them):
- apply edit: `<|original_code|>...<|/original_code|>` + `<|update_snippet|>...<|/update_snippet|>`,
  answered with the merged code: aligned where the alignment is unambiguous (apply_edit.py),
  decided by the model where it is not (apply_edit_model.py);
- next edit: `<|current_file_content|>` with `<|code_to_edit|>` and `<|cursor|>`, plus
  `<|edit_diff_history|>` and `<|recently_viewed_code_snippets|>`, answered with the
  rewritten editable region in a code fence, as Mercury Edit answers it. It is parsed here
  (next_edit_format.py) and served by the next-edit engine request (`Api.next_edit`,
  next_edit_seam.py); a daemon built without one answers it with a 501.
Both formats are served on both routes (Inception's docs put apply edit on /v1/apply/completions
and next edit on /v1/edit/completions; the message says which it is).
The answer is a `chat.completion` (or, streamed, one chunk and `[DONE]`) with `usage`;
an apply edit also says under `dllm_lsp.decisions` which spots the model decided.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
import uuid

from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse

from ..protocol import ProtocolError
from .apply_edit_model import merge_with_model
from .errors import ApiError
from .next_edit_format import is_next_edit, parse_next_edit
from .schemas import EditBody
from .streaming import DONE, sse


def _block(content: str, name: str) -> str | None:
    m = re.search(rf"<\|{name}\|>\n?(.*?)\n?<\|/{name}\|>", content, re.DOTALL)
    return m.group(1) if m else None


def apply_edit_blocks(content: str) -> tuple[str, str]:
    original, snippet = _block(content, "original_code"), _block(content, "update_snippet")
    if original is None or snippet is None:
        raise ProtocolError("messages: an apply-edit message needs <|original_code|>...<|/original_code|> and "
                            "<|update_snippet|>...<|/update_snippet|>")
    return original, snippet


async def serve_apply_edit(engine, content: str) -> tuple[str, list[dict]]:
    original, snippet = apply_edit_blocks(content)
    cancel = threading.Event()
    try:  # in a worker thread: the model's holes block on the engine; a client that goes away cancels them
        return await asyncio.to_thread(merge_with_model, engine, original, snippet, cancel)
    except asyncio.CancelledError:
        cancel.set()
        raise


def fenced(region: str) -> str:
    """The rewritten region as Mercury Edit answers it: in a code fence. Continue's Mercury provider
    reads it back as the text between the first "```\\n" and the last "\\n\\n```"
    (core/nextEdit/providers/MercuryCoderNextEditProvider.ts, extractCompletion): unfenced, it would
    cut three characters off the front and one off the end."""
    return f"```\n{region}\n\n```"


def edit_usage(engine, content: str, text: str) -> dict:
    prompt, completion = len(engine.tokenizer.encode(content)), len(engine.tokenizer.encode(text))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


async def create_edit_completion(request: Request, api):
    body = await api.body(request, EditBody)
    engine = api.ready_engine()
    name = api.models.resolve(engine, body.model)
    users = [m for m in body.messages if m.role == "user"]
    if not users:
        raise ProtocolError("messages: an edit request needs a user message in an apply-edit or next-edit format")
    try:
        content = users[-1].text()
    except ValueError as exc:
        raise ProtocolError(f"messages: {exc}") from None
    extra = {}
    if "<|original_code|>" in content:
        text, decisions = await serve_apply_edit(engine, content)
        extra = {"dllm_lsp": {"decisions": decisions}}
    elif is_next_edit(content):
        prompt = parse_next_edit(content)
        if api.next_edit is None:
            raise ApiError(501, "next edit is not served by this daemon yet (its engine request is issue 14); "
                                "apply edit is", type="server_error", code="not_implemented")
        text = fenced(await api.next_edit(request, engine, prompt, body))
    else:
        raise ProtocolError("messages: the user message is in neither edit format: apply edit "
                            "(<|original_code|>, <|update_snippet|>) or next edit (<|code_to_edit|>)")
    envelope = {"id": f"edit-{uuid.uuid4().hex}", "created": int(time.time()), "model": name}
    usage = edit_usage(engine, content, text)
    if body.stream:
        async def chunks():
            chunk = {"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            yield sse({**envelope, "object": "chat.completion.chunk", "choices": [chunk], **extra})
            if body.include_usage:
                yield sse({**envelope, "object": "chat.completion.chunk", "choices": [], "usage": usage})
            yield DONE
        return StreamingResponse(chunks(), media_type="text/event-stream")
    return JSONResponse({**envelope, "object": "chat.completion",
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                      "finish_reason": "stop"}], "usage": usage, **extra})
