"""A client newer than its daemon: hole fields at their defaults are not sent, and a hint
field (protocol.HINT_FIELDS: it changes only how soon the answer comes) that the daemon's
schema refuses is left out from then on, instead of failing every typed completion.

The daemon is the real one (tiny model, its own Unix socket); an "older" daemon is that
daemon behind a proxy transport that refuses `near_tokens` the way the real schema refuses
any field it does not know (the refusal's text is the real daemon's own, read first)."""

import json
import logging

import httpx
import pytest

from dllm_engine.clients import DaemonClient
from dllm_engine.protocol import Hole, InfillRequest, ProtocolError


def _http(sock):
    return httpx.Client(base_url="http://e", transport=httpx.HTTPTransport(uds=str(sock)), timeout=60)


HOLE = dict(prefix="def add(a, b):\n    return ", suffix="\n", max_tokens=8)


def test_the_daemon_names_a_hole_field_it_does_not_know(daemon):
    with _http(daemon) as c:
        r = c.post("/v1/infill", json={"holes": [{**HOLE, "from_the_future": 1}], "stream": False})
    assert r.status_code == 400
    assert "holes.0.from_the_future: Extra inputs are not permitted" in r.json()["error"]["message"]


def test_a_request_leaves_out_the_hole_fields_at_their_defaults():
    request = InfillRequest(holes=[Hole(**HOLE), Hole(**HOLE, near_tokens=384, stop=("\n",))])
    wire = request.to_wire()
    assert wire["holes"][0] == HOLE
    assert wire["holes"][1] == {**HOLE, "near_tokens": 384, "stop": ("\n",)}
    assert InfillRequest.from_dict(json.loads(json.dumps(wire))) == request
    assert "near_tokens" not in request.to_wire(omit={"near_tokens"})["holes"][1]


async def test_a_daemon_older_than_a_hint_gets_requests_without_it(daemon, caplog):
    with _http(daemon) as c:
        refusal = c.post("/v1/infill", json={"holes": [{**HOLE, "near_tokens_": 1}], "stream": False}).json()
    refusal = json.loads(json.dumps(refusal).replace("near_tokens_", "near_tokens"))
    sent = []

    def older(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        if any("near_tokens" in h for h in body["holes"]):
            return httpx.Response(400, json=refusal)
        with _http(daemon) as c:  # the real daemon's answer, read whole
            r = c.post(request.url.path, content=request.content, headers={"content-type": "application/json"})
        return httpx.Response(r.status_code, content=r.content, headers={"content-type": r.headers["content-type"]})

    client = DaemonClient(url="http://e")
    await client._http.aclose()
    client._http = httpx.AsyncClient(base_url="http://e", transport=httpx.MockTransport(older), timeout=60)
    typed = InfillRequest(holes=[Hole(**HOLE, near_tokens=384)])
    try:
        with caplog.at_level(logging.WARNING, logger="dllm_engine.clients"):
            first = await client.infill(typed)
            second = await client.infill(typed)
        plain = await client.infill(InfillRequest(holes=[Hole(**HOLE)]))
    finally:
        await client.close()
    assert first.holes[0].text == second.holes[0].text == plain.holes[0].text
    assert [("near_tokens" in b["holes"][0]) for b in sent] == [True, False, False, False]
    assert sum("predates hole field(s) near_tokens" in r.getMessage() for r in caplog.records) == 1


async def test_a_field_that_changes_the_answer_still_fails_clearly(daemon):
    """Only hints are left out: a field the daemon does not know that would change the answer
    is the daemon's 400, as it was."""
    client = DaemonClient(socket_path=daemon)
    try:
        with pytest.raises(ProtocolError, match="Extra inputs are not permitted"):
            await client._infill({"holes": [{**HOLE, "from_the_future": True}]}, None)
    finally:
        await client.close()
