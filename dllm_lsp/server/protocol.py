"""pygls's LSP protocol, changed where it would leave a request unanswered or pop up a bug.

- A request whose params cannot be deserialized (a negative position, one of 2^31
  or more, a missing field) fails inside `json.loads`, before any handler or
  schema runs; pygls logs it and drops the message, so the request was never
  answered. Here it gets one `InvalidParams` error response.
- A notification whose params cannot be deserialized (a didChange with a negative
  position, a version past 2^31) cannot be answered; pygls showed it as an
  "internal error" popup, which it is not: the client sent a bad message. It is
  logged and dropped.
- After `shutdown`, pygls drops every request silently; LSP says to answer
  `InvalidRequest`.
- pygls keeps its own copy of every document, which this server never reads
  (`documents.py` keeps the one it uses): a didChange or didClose for a document
  that is not open raised KeyError in that copy and showed an "internal error"
  popup. The notifications go to the server's handlers only, which log it.
"""

from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcInvalidRequest
from pygls.protocol import LanguageServerProtocol

log = logging.getLogger(__name__)


class _Answered:
    """What `structure_message` returns for a message it has already answered."""

    jsonrpc = None


ANSWERED = _Answered()


class DllmProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict[str, Any]):
        try:
            return super().structure_message(data)
        except JsonRpcException:
            # json.loads calls this for every object, innermost first: only a whole
            # message (jsonrpc + method) is ours; anything else keeps pygls's way.
            if not ("jsonrpc" in data and "method" in data):
                raise
            if "id" not in data:
                log.warning("invalid params for notification %.80s: dropped", data.get("method"))
                return ANSWERED
            msg_id = data["id"] if isinstance(data["id"], (int, str)) and not isinstance(data["id"], bool) else None
            log.warning("invalid params for %s (id %r): answered InvalidParams", data.get("method"), msg_id)
            self._send_response(msg_id, error=JsonRpcInvalidParams(
                f"invalid params for {data.get('method')!s:.80}: a field is missing, of the wrong type "
                "or out of range (positions are unsigned 31-bit integers)").to_response_error())
            return ANSWERED

    def handle_message(self, message) -> None:
        if message is ANSWERED:
            return
        if self._shutdown and _is_request(message):
            self._send_response(message.id, error=JsonRpcInvalidRequest(
                f"{message.method}: the server is shutting down").to_response_error())
            return
        super().handle_message(message)

    # One copy of each document: the server's own (documents.py); pygls's is never read.
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams):
        yield from self._user_handler(types.TEXT_DOCUMENT_DID_OPEN, params)

    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):
        yield from self._user_handler(types.TEXT_DOCUMENT_DID_CHANGE, params)

    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams):
        yield from self._user_handler(types.TEXT_DOCUMENT_DID_CLOSE, params)

    def _user_handler(self, method: str, params: Any):
        if (handler := self.fm.features.get(method)) is not None:
            yield handler, (params,), None


def _is_request(message: Any) -> bool:
    """A request has an id and a method (a response has an id and no method)."""
    return getattr(message, "id", None) is not None and isinstance(getattr(message, "method", None), str)
