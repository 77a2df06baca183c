"""Answers given again without the queue: the plain HTTP API's calls whose answer the server already sent.

A lecture hall sends the same calls again and again: the defaults, the tour's steps, the lecturer's example.
The answer cache (ui/cache.py) spares the models, but an answer served from it still crosses all of Gradio's
per-request work in one Python process: the queue, the event loop of its stream, postprocessing every output
and writing the JSON (a cached `/gradient_flow` of 650 kB cost 125 ms of CPU). At 20 calls a second that
work alone saturates the process. This middleware keeps the bytes of each answer Gradio streamed for a
`POST /gradio_api/call/<api_name>` + `GET .../<event_id>` pair and sends the same bytes to the next caller who
posts the same call: a dictionary lookup instead of the queue.

Which answers: only those of events the answer cache may share (`cacheable`: no per-session state among the
inputs; seeded ones take their seed as an input), only successful ones (a stream with an error is never
kept), and only the final `complete` event (a streamed answer's intermediate steps are not replayed, as the
answer cache does). The key is the endpoint and the posted data; the app's checkpoints cannot change while it
serves, so they need not be in it. The answer's download links name the address they were asked through
(Gradio's root URL: the host, or a proxy's forwarded host and scheme): the kept answer leaves a gap where
that root was, filled with each caller's own root, computed by Gradio's own function from the caller's request. An
answer whose download file is gone is dropped and computed again. The cache is bounded in bytes, least recently used
dropped first. Everything else passes through untouched: the browser's own traffic (one stream per session over
/gradio_api/queue), the v2 call API, uploads.
"""

from __future__ import annotations

import re
import threading
import uuid
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import orjson
from gradio import route_utils
from starlette.requests import Request

from playground.lru import Bounded
from playground.ui.gradio_check import mentions, signature

STATUS = re.compile(r"(?:.*)/gradio_api/answer-cache/?")                               # GET: the cache's counts
CALL = re.compile(r"(?:.*)/gradio_api/call/(?P<api>[\w-]+)/?")                          # POST: start a call
RESULT = re.compile(r"(?:.*)/gradio_api/call/(?P<api>[\w-]+)/(?P<event>[0-9a-fA-F-]{8,64})")  # GET: its answer
FILE_PATH = re.compile(rb'"path": "((?:[^"\\]|\\.)*)"')  # a download's path in the answer's JSON
MAX_BODY = 1 << 20            # a call's posted body worth keying on (no upload is above 1 MB)
MAX_ANSWER = 4 << 20          # an answer worth keeping
MAX_BYTES = 32 << 20          # every answer kept, together (the plain API's: the page's own are ui/queuepath.py's)
MAX_WAITING = 10_000          # calls posted but not yet fetched that the middleware follows


LINK = b'"url": "%s/gradio_api/file='  # a download link in an answer, after its root URL


@dataclass(frozen=True)
class Kept:
    parts: tuple[bytes, ...]  # the `complete` event as Gradio wrote it, split where its links name their root
    files: tuple[Path, ...]   # the downloads it links to

    def body(self, root: bytes) -> bytes:
        return (LINK % root).join(self.parts)

    def __len__(self) -> int:
        return sum(map(len, self.parts))


class CachedCalls:
    """ASGI middleware in front of Gradio's routes (launch(app_kwargs={"middleware": [...]})). `serving`: the
    app's ui/demo.Serving (its events' names, the ones whose answers may be kept, the answer cache and the
    prewarm's progress, which GET /gradio_api/answer-cache reports); `cacheable` instead of it: the api_names whose
    answers may be kept, in front of a stand-in for Gradio that answers any other name itself."""

    def __init__(self, app, max_bytes: int = MAX_BYTES, cacheable: frozenset[str] | None = None, serving=None):
        self.app = app
        self.kept: Bounded[Kept] = Bounded(max_bytes, size=len, valid=lambda k: all(p.is_file() for p in k.files))
        # Calls posted but not yet fetched, by event id: a kept answer's bytes handed out, or a computed call
        # followed (its key and the root Gradio puts in its links); the oldest dropped first (playground/lru.py)
        self._ready: Bounded[bytes] = Bounded(max_bytes, max_items=MAX_WAITING, size=len)
        self._following: Bounded[tuple[bytes, bytes]] = Bounded(8 << 20, max_items=MAX_WAITING,
                                                                size=lambda kr: len(kr[0]) + len(kr[1]))
        self.serving = serving
        self._cacheable = cacheable if cacheable is not None else serving.api_names if serving else frozenset()
        self._names: frozenset[str] | None = serving.names if serving else None  # None: any name is the app's

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            path, method = scope["path"], scope["method"]
            if method == "POST" and (match := CALL.fullmatch(path)) and not self._exists(match["api"]):
                return await _respond(send, 404, b"application/json", orjson.dumps(
                    {"error": f"This app has no endpoint named {match['api']!r}; GET /gradio_api/info lists them."}))
            if method == "POST" and match and match["api"] in self._cacheable:
                return await self._post(scope, receive, send, match["api"])
            if method == "GET" and (match := RESULT.fullmatch(path)):
                return await self._get(scope, receive, send, match["event"])
            if method == "GET" and STATUS.fullmatch(path):
                return await _respond(send, 200, b"application/json", orjson.dumps(self.status()))
        await self.app(scope, receive, send)

    def _exists(self, api: str) -> bool:
        """Whether the app has an event named `api` (Gradio itself answers an unknown one with a 500)."""
        return self._names is None or api in self._names

    # -- POST /gradio_api/call/<api>: a kept answer gets an event id of its own; anything else goes to Gradio

    async def _post(self, scope, receive, send, api: str) -> None:
        body, complete = await _read_body(receive)
        key = _key(scope, api, body) if complete else None
        kept = self.kept.get(key)
        if kept is not None:
            event = uuid.uuid4().hex
            self._ready.put(event, kept.body(_root(scope)))
            return await _respond(send, 200, b"application/json", orjson.dumps({"event_id": event}))

        answer = bytearray()

        async def record(message) -> None:  # Gradio's reply, {"event_id": ...}, to follow its stream
            if message["type"] == "http.response.body":
                answer.extend(message.get("body", b""))
                if not message.get("more_body", False):
                    self._follow(bytes(answer), key, _root(scope))  # before the caller can ask for the stream
            await send(message)

        await self.app(scope, _replay(body, complete, receive), record if key is not None else send)

    def _follow(self, reply: bytes, key: bytes, root: bytes) -> None:
        """Follow the stream of the event Gradio's reply names. Registered before the reply reaches the caller:
        followed after it, a caller quick to ask for the stream (a loaded server switches tasks between the two) was
        sent Gradio's stream unkept."""
        if (event := event_id(reply)) is not None:
            self._following.put(event, (key, root))

    # -- GET /gradio_api/call/<api>/<event>: a kept answer at once, or Gradio's stream (kept if it succeeds)

    async def _get(self, scope, receive, send, event: str) -> None:
        ready = self._ready.pop(event)
        following = self._following.pop(event) if ready is None else None
        if ready is not None:
            return await _respond(send, 200, b"text/event-stream; charset=utf-8", ready,
                                  [(b"cache-control", b"no-cache")])
        if following is None:
            return await self.app(scope, receive, send)

        # The answer is kept before its last event reaches the caller: one who posts the same call the moment
        # the answer is in meets it kept (kept once Gradio had returned, a quick second call was computed again)
        stream, status, kept = bytearray(), 0, False

        async def tee(message) -> None:
            nonlocal status, kept
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and len(stream) <= MAX_ANSWER:
                chunk = message.get("body", b"")
                stream.extend(chunk)
                if (not kept and status == 200 and len(stream) <= MAX_ANSWER
                        and (b"event: complete\n" in chunk or not message.get("more_body", False))):
                    kept = self._keep(*following, bytes(stream))
            await send(message)

        await self.app(scope, receive, tee)

    def status(self) -> dict:
        """What the caches hold and have done, and whether the page's defaults are answered yet (`prewarm`):
        the plain API's kept answers at the top level, the page protocol's (ui/queuepath.py) under "queue"."""
        serving = self.serving
        warming = serving is not None and serving.warming.is_set()  # None: no prewarm (the tests' in-process app)
        answers = serving.answers if serving is not None else None
        events = serving.parts.get("queue") if serving is not None else None  # ui/queuepath.py's
        return {"defaults_ready": serving.ready.is_set() if warming else None, "answers": len(self.kept),
                "bytes": self.kept.bytes, "hits": self.kept.hits, "misses": self.kept.misses,
                "queue": events.status() if events is not None else None,
                "handlers": {"answers": len(answers), "bytes": answers.bytes, "hits": answers.hits,
                             "misses": answers.misses, "spent": answers.spent()} if answers is not None else None}

    # -- the store

    def _keep(self, key: bytes, root: bytes, stream: bytes) -> bool:
        """The stream's final answer, if the call succeeded and it is all in: its `complete` event alone, gaps for
        its root. Whether it was kept."""
        if not stream.endswith(b"\n\n"):
            return False
        events = stream.split(b"\n\n")
        if any(e.startswith(b"event: error") for e in events):
            return False
        complete = [e for e in events if e.startswith(b"event: complete\n")]
        if len(complete) != 1:
            return False
        body = complete[0] + b"\n\n"
        self.kept.put(key, Kept(tuple(body.split(LINK % root)), tuple(Path(orjson.loads(b'"' + p + b'"'))
                                                                      for p in FILE_PATH.findall(body))))
        return True

    @property
    def hits(self) -> int:
        return self.kept.hits

    @property
    def misses(self) -> int:
        return self.kept.misses

    def __len__(self) -> int:
        return len(self.kept)


def _key(scope, api: str, body: bytes) -> bytes | None:
    """The call's identity: the endpoint and its data. None when the body is not a plain `{"data": [...]}`
    call (an event's data, a malformed body)."""
    try:
        posted = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(posted, dict) or not isinstance(posted.get("data"), list) or set(posted) - {"data",
                                                                                                   "session_hash"}:
        return None
    return orjson.dumps([api, posted["data"]], option=orjson.OPT_SORT_KEYS)


def event_id(reply: bytes) -> str | None:
    """The event id of Gradio's reply to a call or a queue join; None for a refused one (queue full, bad data)."""
    try:
        event = orjson.loads(reply)["event_id"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    return event if isinstance(event, str) else None


def _root(scope) -> bytes:
    """The root URL Gradio writes into the links of an answer to this call (its own function, its inputs),
    computed once per way of reaching the app: it depends only on the address and the proxy's headers (httpx's URL
    parsing made it a millisecond a request, the largest share of a kept answer's cost)."""
    headers = tuple((k, v) for k, v in scope["headers"] if k == b"host" or k.startswith(b"x-forwarded"))
    way = (scope.get("scheme"), tuple(scope.get("server") or ()), scope.get("root_path"),
           scope["path"].rsplit("/", 2)[0], headers)
    root = _ROOTS.get(way)
    if root is None:
        request = Request(scope)
        url = route_utils.get_root_url(request, route_utils.get_api_call_path(request),
                                       getattr(scope.get("app"), "root_path", None))
        root = orjson.dumps(url)[1:-1]  # as it stands inside the answer's JSON
        _ROOTS.put(way, root)
    return root


_ROOTS: Bounded[bytes] = Bounded(1 << 20, max_items=1_000, size=len)  # a way of reaching the app -> its root URL


async def _read_body(receive) -> tuple[bytes, bool]:
    """The request's body, up to MAX_BODY (more: returned as read so far, and not complete)."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(body), False
        body.extend(message.get("body", b""))
        if not message.get("more_body", False):
            return bytes(body), True
        if len(body) > MAX_BODY:
            return bytes(body), False


def _replay(body: bytes, complete: bool, receive):
    """A `receive` that first hands the app the body already read (all of it, or the start of a longer
    one), then the connection's own messages."""
    sent = False

    async def replayed():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": not complete}
        return await receive()

    return replayed


async def _respond(send, status: int, content_type: bytes, body: bytes, headers=()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


def check_gradio() -> None:
    """What this middleware (and ui/pagecache.py) reads of Gradio 6.31 is as it reads it (a PatchError otherwise,
    ui/gradio_check.py): Gradio's functions of a request's root URL, and the /call stream's final event as Gradio
    writes it (`event: complete`, its data in `json.dumps`' spacing, which LINK and FILE_PATH read)."""
    from gradio import routes

    patch = "call-streams"
    signature(patch, route_utils, "get_root_url", ("request", "route_path", "root_path"))
    signature(patch, route_utils, "get_api_call_path", ("request",))
    mentions(patch, routes, 'event = "complete" if message.success else "error"', "gradio.routes")
    mentions(patch, routes, 'return f"event: {event}\\ndata: {json.dumps(data)}\\n\\n"', "gradio.routes")


def find(app) -> CachedCalls | None:
    """The middleware inside a served Starlette app (for the bench and the tests)."""
    layer = getattr(app, "middleware_stack", None)
    while layer is not None and not isinstance(layer, CachedCalls):
        layer = getattr(layer, "app", None)
    return layer


def prewarm(demo, serving, served_at: Future, skip: frozenset[str] = frozenset()) -> threading.Thread:
    """The answers to the page's defaults, computed when the app starts serving: in-process for every event
    (ui/cache.prewarm, what a browser's page load asks), then once through the plain HTTP API for each named
    one the answer cache shares (`serving`: ui/demo.Serving), so that their first callers are answered by this
    middleware too. The second part waits for `served_at`, the server's address, which app.serve() sets once
    launch() has started the server. `serving.ready` is set when done (GET /gradio_api/answer-cache says so: the
    bench starts a lecture hall after it, as a lecturer starts the app before the class)."""
    import httpx

    from playground.ui import cache

    serving.warming.set()

    def run() -> None:
        cache.prewarm(demo, skip).join()
        names = serving.api_names - set(skip)
        with httpx.Client(base_url=served_at.result(), timeout=600) as client:
            client.get("", headers={"accept-encoding": "gzip, br"})  # the page with its painted defaults, built once
            endpoints = client.get("gradio_api/info").json()["named_endpoints"]
            for name in sorted(names & {path.lstrip("/") for path in endpoints}):
                parameters = endpoints[f"/{name}"]["parameters"]
                if not all(p.get("parameter_has_default") for p in parameters):
                    continue
                try:
                    posted = client.post(f"gradio_api/call/{name}", json={"data": [p["parameter_default"]
                                                                                    for p in parameters]})
                    client.get(f"gradio_api/call/{name}/{posted.json()['event_id']}")
                except (httpx.HTTPError, ValueError, KeyError):
                    continue  # answered when asked
        serving.ready.set()

    thread = threading.Thread(target=run, name="prewarm", daemon=True)
    thread.start()
    return thread
