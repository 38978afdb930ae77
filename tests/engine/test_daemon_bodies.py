"""The daemon's HTTP boundary against a fake engine: strict bodies, size limit, busy, auth (issue 16).

Every invalid body is a 4xx naming the field, never a 5xx and never a request
that reaches the engine; the real daemon over its socket is in test_daemon.py.
"""

from __future__ import annotations

import dataclasses
import json
from concurrent.futures import Future

import httpx
import pytest
from starlette.testclient import TestClient

from dllm_engine.clients import _checked
from dllm_engine.daemon import EngineHost, build_app
from dllm_engine.openai_api.schemas import CompletionBody
from dllm_engine.http_schemas import HoleBody, InfillBody, ParamsBody, ScoreBody
from dllm_engine.protocol import (
    DiffusionParams,
    EngineBusy,
    Hole,
    HoleResult,
    InfillRequest,
    InfillResult,
    ProtocolError,
    ScoreRequest,
)


class FakeEngine:
    """Answers every request at once with an empty fill; records what reached it."""

    model_name = "fake"

    def __init__(self) -> None:
        self.seen: list[InfillRequest] = []
        self.busy = False

    def submit(self, request: InfillRequest, on_event=None):
        if self.busy:
            raise EngineBusy("engine queue is full (256 waiting)")
        self.seen.append(request)
        future: Future = Future()
        future.set_result(InfillResult(request.request_id, [HoleResult("", "end", 1, 0)] * len(request.holes),
                                       "fake", 1.0))
        return type("Handle", (), {"future": future, "cancel": lambda self: None})()

    def health(self) -> dict:
        return {"status": "ok", "model": "fake"}


def make_client(token: str | None = None, max_body_bytes: int = 4096) -> tuple[TestClient, FakeEngine]:
    engine = FakeEngine()
    host = EngineHost(lambda: engine)
    host.engine = engine  # loaded: no background thread needed
    return TestClient(build_app(host, token, max_body_bytes=max_body_bytes), raise_server_exceptions=False), engine


@pytest.fixture
def client():
    c, engine = make_client()
    c.engine = engine
    return c


def post_raw(client: TestClient, path: str, raw: str | bytes):
    return client.post(path, content=raw if isinstance(raw, bytes) else raw.encode(),
                       headers={"content-type": "application/json"})


@pytest.mark.parametrize("body,field", [
    ({"holes": [{"prefix": "x", "max_tokens": 2.5}]}, "holes.0.max_tokens"),
    ({"holes": [{"prefix": "x", "max_tokens": True}]}, "holes.0.max_tokens"),
    ({"holes": [{"prefix": "x", "max_tokens": 2.0}]}, "holes.0.max_tokens"),
    ({"holes": [{"prefix": "x", "max_tokens": 0}]}, "holes.0.max_tokens"),
    ({"holes": [{"prefix": "x", "max_tokens": "many"}]}, "holes.0.max_tokens"),
    ({"holes": [{"prefix": "x", "bucket": 2.5}]}, "holes.0.bucket"),
    ({"holes": [{"prefix": "x", "stop": {"a": 1}}]}, "holes.0.stop"),
    ({"holes": [{"prefix": "x", "stop": [""]}]}, "holes.0.stop.0"),
    ({"holes": [{"prefix": 5}]}, "holes.0.prefix"),
    ({"holes": [{"prefix": "x", "colour": 1}]}, "holes.0.colour"),
    ({"holes": [{"prefix": "x"}], "params": {"threshold": True}}, "params.threshold"),
    ({"holes": [{"prefix": "x"}], "params": {"confidence": "vibes"}}, "params.confidence"),
    ({"holes": [{"prefix": "x"}], "params": {"seed": 2.0}}, "params.seed"),
    ({"holes": [{"prefix": "x"}], "params": {"seed": -1}}, "params.seed"),
    ({"holes": [{"prefix": "x"}], "deadline_s": "soon"}, "deadline_s"),
    ({"holes": [{"prefix": "x"}], "stream": 1}, "stream"),
    ({"holes": []}, "at least one hole"),
    ({"holes": [{"prefix": "x", "max_tokens": 4, "bucket": 8}]}, "bucket"),
    ([1, 2], "JSON object"),
])
def test_bad_infill_bodies_are_400_naming_the_field(client, body, field):
    r = client.post("/v1/infill", json=body)
    assert r.status_code == 400, r.text
    assert field in r.json()["error"]["message"]
    assert not client.engine.seen


@pytest.mark.parametrize("path,raw,field", [
    ("/v1/infill", '{"holes": [{"prefix": "x = \\ud800"}]}', "holes.0.prefix"),
    ("/v1/infill", '{"holes": [{"prefix": "x", "suffix": "\\udc00 half an emoji"}]}', "holes.0.suffix"),
    ("/v1/infill", '{"holes": [{"prefix": "x", "stop": ["\\ud83d"]}]}', "holes.0.stop.0"),
    ("/v1/completions", '{"prompt": "x = \\ud800"}', "prompt"),
    ("/v1/score", '{"prefix": "", "span": "\\ud800"}', "span"),
])
def test_lone_surrogates_are_400_naming_the_field(client, path, raw, field):
    r = post_raw(client, path, raw)
    assert r.status_code == 400, r.text
    assert field in r.json()["error"]["message"] and "surrogate" in r.json()["error"]["message"]


@pytest.mark.parametrize("body,field", [
    ({"prompt": "x", "max_tokens": 0}, "max_tokens"),
    ({"prompt": "x", "max_tokens": 2.5}, "max_tokens"),
    ({"prompt": "x", "max_tokens": True}, "max_tokens"),
    ({"prompt": "x", "temperature": "hot"}, "temperature"),
    ({"prompt": "x", "stop": {"a": 1}}, "stop"),
    ({"prompt": "x", "max_tokens": -1}, "max_tokens"),
    ({"prompt": "x", "n": 0}, "n"),
    ({"prompt": "x", "stream": 1}, "stream"),
    ({"prompt": [1, 2]}, "prompt"),
    ({"prompt": "x", "echo": True}, "echo"),
    ({"prompt": "x", "logprobs": 1}, "logprobs"),
    ({"prompt": "x", "best_of": 9}, "best_of"),
    ({"prompt": "x", "best_of": 2, "n": 2}, "best_of"),
    ({"prompt": "x", "best_of": 2, "stream": True}, "best_of"),
    ({"suffix": "x"}, "prompt"),
])
def test_bad_completion_bodies_are_400(client, body, field):
    r = client.post("/v1/completions", json=body)
    assert r.status_code == 400, r.text
    assert field in r.json()["error"]["message"]


@pytest.mark.parametrize("body,field", [
    ({"prefix": "", "span": ""}, "span"),
    ({"prefix": "", "span": "x", "stride": True}, "stride"),
    ({"prefix": "", "span": "x", "stride": 99}, "stride"),
])
def test_bad_score_bodies_are_400(client, body, field):
    r = client.post("/v1/score", json=body)
    assert r.status_code == 400, r.text
    assert field in r.json()["error"]["message"]


def test_good_bodies_keep_the_protocol_defaults(client):
    r = client.post("/v1/infill", json={"holes": [{"prefix": "x = ", "stop": ["\n"]}], "request_id": "r1"})
    assert r.status_code == 200, r.text
    [req] = client.engine.seen
    assert req.request_id == "r1" and req.holes == [Hole(prefix="x = ", stop=("\n",))]
    assert req.params == DiffusionParams()
    # What DaemonClient sends (nulls included) is accepted as it is.
    sent = InfillRequest(holes=[Hole(prefix="a", suffix="b", max_tokens=8, bucket=8, stop=("\n",))],
                         params=DiffusionParams(threshold=1, max_passes=None), deadline_s=2)
    assert client.post("/v1/infill", json=json.loads(json.dumps(sent.to_dict()))).status_code == 200
    assert client.engine.seen[-1].holes == sent.holes and client.engine.seen[-1].params == sent.params
    # OpenAI clients send nulls and fields we ignore.
    r = client.post("/v1/completions", json={"model": "m", "prompt": ["def f():"], "suffix": None, "stop": "\n",
                                             "max_tokens": 16, "temperature": None, "echo": False})
    assert r.status_code == 200, r.text
    hole = client.engine.seen[-1].holes[0]
    assert (hole.prefix, hole.suffix, hole.stop, hole.max_tokens) == ("def f():", "", ("\n",), 16)
    # OpenAI's best_of is best of N: N fills, one answer.
    r = client.post("/v1/completions", json={"prompt": "def f():", "best_of": 3, "n": 1})
    assert r.status_code == 200, r.text
    assert client.engine.seen[-1].params.candidates == 3 and len(r.json()["choices"]) == 1
    r = client.post("/v1/infill", json={"holes": [{"prefix": "x"}], "params": {"candidates": 9}})
    assert r.status_code == 400 and "candidates" in r.json()["error"]["message"]


def test_schemas_cover_every_protocol_field():
    """One definition per body: a field added to a dataclass must be added to its schema."""
    pairs = [(HoleBody, Hole), (ParamsBody, DiffusionParams), (InfillBody, InfillRequest), (ScoreBody, ScoreRequest)]
    for schema, cls in pairs:
        assert set(schema.model_fields) == {f.name for f in dataclasses.fields(cls)}, schema.__name__
    assert {"prompt", "suffix", "max_tokens", "stop"} <= set(CompletionBody.model_fields)


@pytest.mark.parametrize("path", ["/v1/infill", "/v1/completions", "/v1/score"])
def test_deep_json_is_400(path):
    client, _ = make_client(max_body_bytes=2**20)
    r = post_raw(client, path, "[" * 100_000 + "]" * 100_000)
    assert r.status_code == 400 and "deep" in r.json()["error"]["message"]
    r = post_raw(client, path, '{"prompt": "x", "prefix": "", "span": "x", "holes": ' + "[" * 5000 + "]" * 5000 + "}")
    assert r.status_code == 400


def test_bodies_over_the_limit_are_413_before_they_are_read(client):
    big = json.dumps({"holes": [{"prefix": "x" * 5000}]}).encode()
    r = post_raw(client, "/v1/infill", big)
    assert r.status_code == 413 and "limit" in r.json()["error"]["message"]
    # Without a Content-Length (chunked), it is cut off while it streams in.
    r = client.post("/v1/infill", content=(big[i:i + 1000] for i in range(0, len(big), 1000)))
    assert r.status_code == 413
    for path in ("/v1/completions", "/v1/score"):
        assert post_raw(client, path, big).status_code == 413
    assert not client.engine.seen
    assert client.post("/v1/infill", json={"holes": [{"prefix": "x" * 3000}]}).status_code == 200


def test_a_full_queue_is_429_with_retry_after(client):
    client.engine.busy = True
    r = client.post("/v1/infill", json={"holes": [{"prefix": "x"}]})
    assert r.status_code == 429 and r.headers["retry-after"] == "1"
    r = client.post("/v1/completions", json={"prompt": "x"})
    assert r.status_code == 429 and "retry-after" in r.headers
    with pytest.raises(EngineBusy):
        _checked(httpx.Response(429, json=r.json()))


def test_clients_read_the_new_errors():
    with pytest.raises(ProtocolError, match="limit"):
        _checked(httpx.Response(413, json={"error": "request body is over the limit of 4 bytes", "status": 413}))
    with pytest.raises(ProtocolError, match="holes.0.max_tokens"):
        _checked(httpx.Response(400, json={"error": "holes.0.max_tokens: Input should be a valid integer"}))


def test_a_non_ascii_authorization_header_is_401():
    client, _ = make_client(token="s3cret")
    headers = [(b"authorization", "Bearer s3crét".encode("latin-1"))]
    r = client.get("/health", headers=dict(headers))
    assert r.status_code == 401
    assert client.post("/v1/infill", json={"holes": [{"prefix": "x"}]}, headers=dict(headers)).status_code == 401
    assert client.get("/health", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_a_body_that_never_arrives_is_408(tmp_path):
    """Issue 16: a client that sent its headers and went silent was held as long as it liked."""
    import socket
    import threading
    import time

    import uvicorn

    from dllm_engine.daemon import bind_unix_socket

    engine = FakeEngine()
    host = EngineHost(lambda: engine)
    host.engine = engine
    app = build_app(host, body_timeout_s=0.5)
    sock = bind_unix_socket(tmp_path / "engine.sock")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.settimeout(10)
        deadline = time.monotonic() + 10
        while True:
            try:
                c.connect(str(tmp_path / "engine.sock"))
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        start = time.monotonic()
        c.sendall(b"POST /v1/infill HTTP/1.1\r\nHost: e\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100\r\n\r\n{\"holes\":")
        answer = c.recv(65536)
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert time.monotonic() - start < 5
        c.close()
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
    assert not engine.seen


def test_a_client_gone_before_its_body_is_read_is_499_not_a_logged_500(caplog):
    """Found by the soak: under load a client that gave up before the handler read its body raised
    starlette's ClientDisconnect, logged with a traceback and answered 500."""
    import asyncio

    engine = FakeEngine()
    host = EngineHost(lambda: engine)
    host.engine = engine
    app = build_app(host)
    sent: list[dict] = []

    async def receive():
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/infill", "raw_path": b"/v1/infill", "query_string": b"",
             "headers": [(b"content-type", b"application/json")], "http_version": "1.1", "scheme": "http",
             "server": ("e", 80), "client": ("c", 1), "root_path": "", "asgi": {"version": "3.0"}}
    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 499
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text
    assert not engine.seen


def test_openai_bodies_become_the_right_holes(client):
    """n copies per prompt, in OpenAI's order; Continue's "<|endoftext|>" suffix means none (issue 13)."""
    r = client.post("/v1/completions", json={"prompt": ["a", "b"], "n": 2, "suffix": "<|endoftext|>",
                                             "max_tokens": 8, "stop": ["\n\n"], "temperature": 0.5, "seed": 3,
                                             "presence_penalty": 1.5, "user": "me"})
    assert r.status_code == 200, r.text
    req = client.engine.seen[-1]
    assert [(h.prefix, h.suffix, h.stop) for h in req.holes] == [("a", "", ("\n\n",))] * 2 + [("b", "", ("\n\n",))] * 2
    assert (req.params.temperature, req.params.seed, req.params.remask_below) == (0.5, 3, 0.0)
    assert [c["index"] for c in r.json()["choices"]] == [0, 1, 2, 3]
    r = client.post("/v1/completions", json={"prompt": "x", "max_tokens": 1025})
    assert r.status_code == 400 and r.json()["error"]["param"] == "max_tokens"
    r = client.get("/v1/nope")
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_url"
    r = client.get("/v1/completions")
    assert r.status_code == 405 and r.json()["error"]["type"] == "invalid_request_error"


def test_a_bug_is_a_500_whose_request_id_is_in_the_body_and_the_log(client, caplog):
    def broken(request, **kw):
        raise TypeError("a bug")

    client.engine.submit = broken
    with caplog.at_level("ERROR", logger="dllm_engine.daemon"):
        r = client.post("/v1/completions", json={"prompt": "x"})
    assert r.status_code == 500
    error = r.json()["error"]
    assert error["type"] == "server_error" and error["code"] == "internal_error" and "TypeError" in error["message"]
    request_id = error["message"].split("request id ")[1].split(")")[0]
    assert any(request_id in rec.getMessage() for rec in caplog.records)
