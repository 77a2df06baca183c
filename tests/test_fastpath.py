"""The plain HTTP API's answers served again without the queue (playground/ui/fastpath.py): against a stand-in
for Gradio's two routes, then against the real app. A kept answer is byte for byte the one Gradio sent; calls that
differ in anything (data, endpoint, the address asked) are never mixed; errors, per-session events and answers
whose download is gone are computed again."""

from __future__ import annotations

import itertools
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from playground.ui import fastpath
from playground.ui.fastpath import CachedCalls


class Gradio:
    """Gradio's /call routes in miniature: POST gives an event id, GET streams `generating` then `complete`
    (or an `error` when the first input is "bad"). The answer names the host it was asked through."""

    def __init__(self, download: Path | None = None):
        self.computed = 0
        self.events: dict[str, tuple[str, list, str]] = {}
        self.ids = itertools.count()
        self.download = download

    async def __call__(self, scope, receive, send):
        host = dict(scope["headers"]).get(b"host", b"").decode()
        api = scope["path"].split("/")[3]
        if scope["method"] == "POST":
            body = b""
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            event = f"{next(self.ids):032x}"
            self.events[event] = (api, json.loads(body)["data"], host)
            return await reply(send, "application/json", json.dumps({"event_id": event}).encode())
        api, data, host = self.events.pop(scope["path"].rsplit("/", 1)[1])
        self.computed += 1
        if data and data[0] == "bad":
            return await reply(send, "text/event-stream", b'event: error\ndata: "That is not a sentence."\n\n')
        answer = [api, data, self.computed, host]
        if self.download:
            answer.append({"path": str(self.download), "url": f"http://{host}/gradio_api/file={self.download}"})
        stream = f"event: generating\ndata: {json.dumps(answer)}\n\nevent: complete\ndata: {json.dumps(answer)}\n\n"
        await reply(send, "text/event-stream", stream.encode())


async def reply(send, content_type: str, body: bytes) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", content_type.encode())]})
    await send({"type": "http.response.body", "body": body})


def call(client, api: str, *data, host: str = "testserver") -> str:
    event = client.post(f"gradio_api/call/{api}", json={"data": list(data)}, headers={"host": host}).json()["event_id"]
    return client.get(f"gradio_api/call/{api}/{event}", headers={"host": host}).text


@pytest.fixture
def served():
    gradio = Gradio()
    middleware = CachedCalls(gradio, cacheable=frozenset({"tokenize", "attention"}))
    return gradio, middleware, TestClient(middleware)


def test_an_answer_is_computed_once_and_served_again_as_gradio_sent_it(served):
    gradio, middleware, client = served
    first = call(client, "tokenize", "The bank.", ["bpe"])
    again = call(client, "tokenize", "The bank.", ["bpe"])
    assert gradio.computed == 1 and (middleware.hits, len(middleware)) == (1, 1)
    complete = first[first.index("event: complete"):]
    assert again == complete  # the final event, byte for byte (the steps of a stream are not replayed)


def test_calls_that_differ_in_anything_are_never_mixed(served):
    gradio, middleware, client = served
    answers = {call(client, *request) for request in [("tokenize", "a"), ("tokenize", "b"), ("attention", "a"),
                                                       ("tokenize", "a", 1), ("tokenize", "a", 1.0)]}
    assert len(answers) == 5 and gradio.computed == 5 and middleware.hits == 0


def test_a_kept_answer_links_to_the_address_each_caller_asked_through(tmp_path):
    download = tmp_path / "tokenize.json"
    download.write_text("{}")
    gradio = Gradio(download)
    client = TestClient(CachedCalls(gradio, cacheable=frozenset({"tokenize"})))
    here = call(client, "tokenize", "a")
    there = call(client, "tokenize", "a", host="lecture.example.edu")
    proxied = client.get(f"/gradio_api/call/tokenize/{client.post('/gradio_api/call/tokenize', json={'data': ['a']}, headers={'x-forwarded-host': 'hall.example.org', 'x-forwarded-proto': 'https'}).json()['event_id']}").text
    assert gradio.computed == 1
    assert f'"url": "http://testserver/gradio_api/file={download}"' in here
    assert f'"url": "http://lecture.example.edu/gradio_api/file={download}"' in there
    assert f'"url": "https://hall.example.org/gradio_api/file={download}"' in proxied


def test_overlapping_calls_each_get_their_own_answer(served):
    gradio, middleware, client = served
    texts = [f"sentence {i % 12}" for i in range(96)]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda text: call(client, "tokenize", text), texts))
    for text, answer in zip(texts, answers):
        data = json.loads(answer[answer.index("event: complete"):].split("data: ", 1)[1])
        assert data[:2] == ["tokenize", [text]]
    assert middleware.hits + middleware.misses == 96 and gradio.computed <= 96 - middleware.hits


def test_errors_other_events_and_other_bodies_are_always_computed(served):
    gradio, middleware, client = served
    assert "event: error" in call(client, "tokenize", "bad") and "event: error" in call(client, "tokenize", "bad")
    call(client, "memory_experiment", 3), call(client, "memory_experiment", 3)  # not cacheable: passes through
    event = client.post("/gradio_api/call/tokenize", json={"data": ["a"], "event_data": 1}).json()["event_id"]
    client.get(f"/gradio_api/call/tokenize/{event}")
    assert gradio.computed == 5 and len(middleware) == 0


class LingeringGradio(Gradio):
    """Gradio whose POST route is still running after its reply has left (a loaded server): the caller's GET for
    the stream arrives in between."""

    def __init__(self):
        super().__init__()
        self.middleware = None

    async def __call__(self, scope, receive, send):
        if scope["method"] != "POST":
            return await super().__call__(scope, receive, send)
        sent = []
        await super().__call__(scope, receive, lambda message: _append(sent, message, send))
        event = json.loads(sent[-1]["body"])["event_id"]
        stream = await _get(self.middleware, f"/gradio_api/call/{scope['path'].split('/')[3]}/{event}")
        assert b"event: complete" in stream


async def _append(sent: list, message, send) -> None:
    sent.append(message)
    await send(message)


async def _get(app, path: str) -> bytes:
    """GET `path` from the ASGI `app` in the running loop; the body."""
    scope = {"type": "http", "method": "GET", "path": path, "headers": [(b"host", b"testserver")], "scheme": "http",
             "server": ("testserver", 80), "root_path": "", "query_string": b"", "http_version": "1.1"}
    body = bytearray()

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        body.extend(message.get("body", b""))

    await app(scope, receive, send)
    return bytes(body)


def test_a_stream_asked_for_before_gradio_has_finished_the_post_is_kept():
    """The event is followed from the moment its id leaves, not once Gradio's POST route returns (the served app's
    test found the answer computed twice in a loaded full run)."""
    gradio = LingeringGradio()
    gradio.middleware = middleware = CachedCalls(gradio, cacheable=frozenset({"tokenize"}))
    client = TestClient(middleware)
    client.post("gradio_api/call/tokenize", json={"data": ["The bank."]})  # its stream fetched inside the POST
    call(client, "tokenize", "The bank.")
    assert (gradio.computed, middleware.hits) == (1, 1)


def test_an_answer_whose_download_is_gone_is_computed_again(tmp_path):
    download = tmp_path / "tokenize.json"
    download.write_text("{}")
    gradio = Gradio(download)
    client = TestClient(CachedCalls(gradio, cacheable=frozenset({"tokenize"})))
    call(client, "tokenize", "a"), call(client, "tokenize", "a")
    assert gradio.computed == 1
    download.unlink()
    call(client, "tokenize", "a")
    assert gradio.computed == 2


def test_an_answer_is_kept_before_its_last_event_reaches_the_caller(served):
    """A caller who posts the same call the moment the answer is in meets it kept. It was kept only once Gradio's
    handler had returned, after the caller had the answer: on a loaded server a quick second call was computed again."""
    gradio, middleware, _ = served
    kept_as_it_arrived = []

    async def caller(scope, receive, send):  # the caller's side of the middleware: what is kept as each part arrives
        async def arrive(message) -> None:
            if b"event: complete" in message.get("body", b""):
                kept_as_it_arrived.append(len(middleware))
            await send(message)
        await middleware(scope, receive, arrive)

    call(TestClient(caller), "tokenize", "The bank.", ["bpe"])
    assert kept_as_it_arrived == [1]


def test_the_kept_answers_stay_within_their_bytes():
    gradio = Gradio()
    middleware = CachedCalls(gradio, max_bytes=2_000, cacheable=frozenset({"tokenize"}))
    client = TestClient(middleware)
    for i in range(40):
        call(client, "tokenize", f"sentence number {i}")
    assert 0 < len(middleware) < 40 and middleware.kept.bytes <= 2_000
    call(client, "tokenize", "sentence number 39")  # the most recent are kept
    assert gradio.computed == 40


def test_the_served_app_answers_its_api_again_without_the_queue(app_url):
    """Through the real app: the second call is the first's final event, byte for byte, and counted a hit."""
    import app

    middleware = fastpath.find(app.demo.server_app)
    assert middleware is not None
    with httpx.Client(base_url=app_url, timeout=120) as client:
        parameters = client.get("gradio_api/info").json()["named_endpoints"]["/fill_mask"]["parameters"]
        rest = [p["parameter_default"] for p in parameters[1:]]
        first = call(client, "fill_mask", "The river [MASK] was closed.", *rest, host=client.base_url.netloc.decode())
        hits = middleware.hits
        again = call(client, "fill_mask", "The river [MASK] was closed.", *rest, host=client.base_url.netloc.decode())
        other = call(client, "fill_mask", "The [MASK] was closed.", *rest, host=client.base_url.netloc.decode())
    assert "event: complete" in first and again == first[first.index("event: complete"):]
    assert middleware.hits == hits + 1 and other != again
