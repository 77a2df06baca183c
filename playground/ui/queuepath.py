"""Answers given again through the page's own protocol, without the queue: what a class's browsers send.

A browser sends every event through Gradio's queue: `POST /gradio_api/queue/join` (the event's fn_index, its
inputs, the page's session hash), then reads the session's stream, `GET /gradio_api/queue/data`, up to the event's
`process_completed` message. An answer the answer cache (ui/cache.py) already holds still crosses the queue's
per-event work: dispatching, preprocessing, postprocessing every output (a 600 kB gradient-flow figure is turned into
JSON again for each student), moving its files, serialising. A lecture hall asks the same events again and again,
so this middleware keeps what the stream sent for an event's inputs and sends the same bytes to the next browser
that joins with the same inputs: the event's notices, then its `process_completed` message, put straight into that
browser's session stream. Gradio's postprocessing runs once per answer, not once per student.

Which answers: those of events the answer cache may share (`cacheable`: no per-session state among their inputs),
and only successful ones. The key is the event and its inputs (the event data of a select included); the app's
checkpoints cannot change while it serves. What the event left in the session is given to the new session too,
as Gradio would have left it: a gr.State output's value (a copy for each session) and an update's new properties
(a slider's new maximum). Download links name the address they were asked through: the kept answer leaves a gap
where that root was, filled with each session's own. Kept answers are bounded in bytes (playground/lru.py).

Pages that ask the same inputs while the first answer is still being computed (200 followers applying the
lecturer's new sentence at once) wait for that answer and get it as a kept one: Gradio computes and postprocesses
it once, not once per page. A waiter whose first answer was not kept (an error, too large), whose first asker's
stream closed without it (a page reloaded while it computed), or that did not come in time asks Gradio itself
(where the answer cache, ui/cache.py, still waits for the computation in flight rather than repeat it). The wait
holds the join's reply: a browser's page waits up to COALESCE_SECONDS; any other client (one whose request has no
Sec-Fetch-Mode header, which every browser's fetch sends) HOLD_SECONDS, because a script's HTTP client gives up on a
join not answered within its timeout (gradio_client's: 5 s; held 20 s, it failed). Held 2 s for pages too, 200
followers' p95 went from 1.15 to 2.13 s (docs/performance.md). (A waiter sees no streamed step of the first answer,
only its end: so did a page whose answer the answer cache was already computing for another, apart from a
"waiting" notice.)

It also guards the queue: a session that sends the same event with the same inputs more than REPEATS times within
REPEAT_WINDOW seconds (a page caught in a loop of change events) is refused with a clear message instead of
computing for ever; and a join naming an event the app does not have is refused as the client's mistake (404),
not as a server error.
"""

from __future__ import annotations

import asyncio
import copy
import re
import time
import uuid
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs

import orjson
from gradio.server_messages import LogMessage, ProcessCompletedMessage
from pydantic import PrivateAttr

from playground.lru import Bounded
from playground.ui.gradio_check import PatchError, fields
from playground.ui.fastpath import MAX_ANSWER, MAX_BODY, _read_body, _replay, _respond, _root, event_id

# every kept answer together (the page's defaults are about 2 MB; a class's own inputs fill the rest)
MAX_BYTES = 96 << 20
REPEATS, REPEAT_WINDOW = 12, 30.0  # the same event with the same inputs, from one session: more is a loop
COALESCE_SECONDS = 20.0            # the longest a browser's page waits for another page's answer to the same inputs
HOLD_SECONDS = 2.0                 # the longest any other client's join is held for it (gradio_client waits 5 s)
LINK = b'"url":"%s/gradio_api/file='                  # a download link in the stream's JSON, after its root URL
FILE_PATH = re.compile(rb'"path":"((?:[^"\\]|\\.)*)"')  # a download's path there
EVENT_ID = re.compile(rb'"event_id":"([0-9a-fA-F-]{8,64})"')  # the event a stream message is about


@dataclass(frozen=True)
class KeptEvent:
    parts: tuple[bytes, ...]       # the output's JSON, split where its links name their root
    notices: tuple[dict, ...]      # the event's log messages (gr.Warning, gr.Info), as sent
    state: tuple[tuple[int, object], ...]   # (block id, value) of its gr.State outputs
    updates: tuple[tuple[int, dict], ...]   # (block id, new properties) of its updated outputs
    files: tuple[Path, ...]        # the downloads it links to

    def output(self, root: bytes) -> bytes:
        return (LINK % root).join(self.parts)

    def __len__(self) -> int:
        return sum(map(len, self.parts)) + sum(len(orjson.dumps(n)) for n in self.notices)


class KeptCompletion(ProcessCompletedMessage):
    """`process_completed` with an output already written as JSON: Gradio's stream writes it as it is."""
    _output: bytes = PrivateAttr(b"{}")

    def model_dump(self, *args, **kwargs) -> dict:
        dumped = super().model_dump(*args, **kwargs)
        dumped["output"] = orjson.Fragment(self._output)
        return dumped


class CachedEvents:
    """ASGI middleware in front of Gradio's queue routes (launch(app_kwargs={"middleware": [...]})), handed the
    served Blocks (its events, its sessions' state, its queue) and its ui/demo.Serving (which events are shared)."""

    def __init__(self, app, blocks, serving, max_bytes: int = MAX_BYTES):
        self.app = app
        self.blocks = blocks
        self.kept: Bounded[KeptEvent] = Bounded(max_bytes, size=len, valid=lambda k: all(p.is_file() for p in k.files))
        self._following: Bounded[tuple[bytes, bytes, int]] = Bounded(1 << 20, max_items=10_000, size=lambda _: 1)
        self._recent: dict[tuple[str, bytes], deque] = {}  # (session, event and inputs) -> when it was joined
        self._computing: dict[bytes, tuple[asyncio.Event, float]] = {}  # inputs -> (set when its answer landed,
                                                                        # when it was asked)
        self._leading: dict[str, set[bytes]] = {}            # a session -> the inputs others wait on it for
        self.coalesced = 0
        self._cacheable: dict[int, object] = {i: blocks.fns[i] for i in serving.cacheable}  # fn_index -> its event
        self.refused = 0
        serving.parts["queue"] = self  # GET /gradio_api/answer-cache reports it (ui/fastpath.py)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            path, method = scope["path"], scope["method"]
            if method == "POST" and path.endswith("/gradio_api/queue/join"):
                return await self._join(scope, receive, send)
            if method == "GET" and path.endswith("/gradio_api/queue/data"):
                return await self._data(scope, receive, send)
        await self.app(scope, receive, send)

    # -- POST queue/join: a kept answer straight into the session's stream; anything else goes to Gradio

    async def _join(self, scope, receive, send) -> None:
        body, complete = await _read_body(receive)
        posted = _posted(body) if complete else None
        if posted is None:  # not a join this middleware understands: Gradio answers it
            return await self.app(scope, _replay(body, complete, receive), send)
        blocks, cacheable = self.blocks, self._cacheable
        fn_index, session = posted["fn_index"], posted["session_hash"]
        if fn_index not in blocks.fns:
            return await _respond(send, 404, b"application/json", orjson.dumps(
                {"error": f"This app has no event {fn_index!r}: reload the page."}))
        inputs = orjson.dumps([fn_index, posted["data"], posted.get("event_data")], option=orjson.OPT_SORT_KEYS)
        if self._looping(session, inputs):
            self.refused += 1
            return await _respond(send, 429, b"application/json", orjson.dumps(
                {"error": f"The same request came {REPEATS} times within {REPEAT_WINDOW:g} s from this page; "
                          "its answer is already shown. Reload the page if it keeps asking."}))
        key = inputs if fn_index in cacheable else None
        kept = self.kept.get(key)
        if kept is None and key is not None:
            browser = any(name == b"sec-fetch-mode" for name, _ in scope.get("headers", ()))
            kept = await self._after_the_first(key, session, COALESCE_SECONDS if browser else HOLD_SECONDS)
        if kept is not None:
            event = await self._deliver(blocks, cacheable[fn_index], session, kept, _root(scope))
            return await _respond(send, 200, b"application/json", orjson.dumps({"event_id": event}))

        answer = bytearray()

        async def record(message) -> None:  # Gradio's reply, {"event_id": ...}: its stream is followed
            if message["type"] == "http.response.body":
                answer.extend(message.get("body", b""))
                if not message.get("more_body", False):
                    self._follow(bytes(answer), (key, _root(scope), fn_index))  # before the page hears of it
            await send(message)

        await self.app(scope, _replay(body, complete, receive), record if key is not None else send)

    def _follow(self, reply: bytes, followed: tuple) -> None:
        """Follow the event Gradio's reply names, as soon as the reply is complete (ui/fastpath.CachedCalls._follow:
        registered after Gradio's route returned, a loaded server could finish the event first)."""
        if (event := event_id(reply)) is not None:
            self._following.put(event, followed)
        else:                                   # refused: nothing will land for those who wait on it
            self._landed(followed[0])

    async def _after_the_first(self, key: bytes, session: str, hold: float) -> KeptEvent | None:
        """When the same inputs are being computed for another page, wait for that answer and give it (200
        followers asking a new view's figure at once: one computation and one postprocessing, not 200). The
        first asker's answer is None: it goes to Gradio. So is a waiter's when the first answer was not kept (an
        error, too large), the first asker's stream closed without it, or it did not land within `hold` seconds:
        it asks Gradio itself."""
        if len(self._computing) > 1_000:       # forget askers that went away
            self._computing = {k: v for k, v in self._computing.items() if time.monotonic() - v[1] < COALESCE_SECONDS}
        if len(self._leading) > 10_000:        # sessions whose stream never opened
            self._leading.clear()
        computing, asked = self._computing.get(key, (None, 0.0))
        if computing is None or time.monotonic() - asked > COALESCE_SECONDS:   # none, or its asker went away
            self._computing[key] = (asyncio.Event(), time.monotonic())
            self._leading.setdefault(session, set()).add(key)
            return None
        try:
            left = COALESCE_SECONDS - (time.monotonic() - asked)
            await asyncio.wait_for(computing.wait(), min(hold, left))
        except TimeoutError:
            return None
        kept = self.kept.get(key)
        self.coalesced += kept is not None
        return kept

    def _landed(self, key: bytes | None) -> None:
        """The first asker's answer for `key` came (kept or not): those who wait on it go on."""
        computing, _ = self._computing.pop(key, (None, 0.0)) if key is not None else (None, 0.0)
        if computing is not None:
            computing.set()

    def _looping(self, session: str, inputs: bytes) -> bool:
        """True when `session` sent these inputs REPEATS times within REPEAT_WINDOW seconds already."""
        now = time.monotonic()
        if len(self._recent) > 20_000:  # forget sessions that stopped sending
            self._recent = {k: v for k, v in self._recent.items() if v and now - v[-1] < REPEAT_WINDOW}
        times = self._recent.setdefault((session, inputs), deque(maxlen=REPEATS))
        looping = len(times) == REPEATS and now - times[0] < REPEAT_WINDOW
        times.append(now)
        return looping

    async def _deliver(self, blocks, fn, session: str, kept: KeptEvent, root: bytes) -> str:
        """The kept answer as an event of `session`: what it leaves in the session, then its messages."""
        state = blocks.state_holder[session]  # as Gradio's postprocessing leaves it (less the per-block configs
        for block_id, value in kept.state:    # its __setitem__ rebuilds, which only deep links read: ui/patches.py)
            state.state_data[block_id] = copy.deepcopy(value)
        for block_id, properties in kept.updates:
            block = blocks.blocks[block_id]
            base = state.blocks_config.blocks.get(block_id, block)
            state.blocks_config.blocks[block_id] = block.__class__(**{**base.constructor_args, **properties,
                                                                       "render": False})
        queue, event = blocks._queue, uuid.uuid4().hex
        async with queue.pending_message_lock:  # as Gradio's queue.push makes a session's stream
            if session not in queue.pending_messages_per_session:
                queue.pending_messages_per_session[session] = asyncio.Queue()
            if session not in queue.pending_event_ids_session:
                queue.pending_event_ids_session[session] = set()
            messages = queue.pending_messages_per_session[session]
            queue.pending_event_ids_session[session].add(event)
        for notice in kept.notices:
            messages.put_nowait(LogMessage(**{**notice, "event_id": event}))
        completed = KeptCompletion(output={}, success=True, event_id=event)
        completed._output = kept.output(root)
        messages.put_nowait(completed)
        return event

    # -- GET queue/data: Gradio's stream, read on its way out for the answers of followed events

    async def _data(self, scope, receive, send) -> None:
        session = parse_qs(scope.get("query_string", b"").decode()).get("session_hash", [None])[0]
        if session is None:
            return await self.app(scope, receive, send)
        buffer, notices = bytearray(), {}

        async def tee(message) -> None:
            if message["type"] == "http.response.body":
                buffer.extend(message.get("body", b""))
                while (end := buffer.find(b"\n\n")) >= 0:
                    self._read(session, bytes(buffer[:end]), notices)
                    del buffer[:end + 2]
            await send(message)

        try:
            await self.app(scope, receive, tee)
        finally:      # the page's stream closed (its answers read, or the page reloaded or left): nobody waits on it
            for key in self._leading.pop(session, ()):
                self._landed(key)

    def _read(self, session: str, chunk: bytes, notices: dict) -> None:
        """One message of the stream: a followed event's notice is noted, its successful completion kept."""
        head = chunk[:160]
        if not chunk.startswith(b"data: ") or not (b'"process_completed"' in head or b'"log"' in head):
            return
        named = EVENT_ID.search(head)  # a message names its event first: parse only the followed events' messages
        if named is None or named[1].decode() not in self._following:
            return
        if len(chunk) > MAX_ANSWER:              # not kept: those who wait on it ask Gradio themselves
            if b'"process_completed"' in head:
                self._landed(self._following.pop(named[1].decode())[0])
            return
        message = orjson.loads(chunk[6:])
        event = message.get("event_id")
        following = self._following.get(event) if event else None
        if following is None:
            return
        if message["msg"] == "log":
            notices.setdefault(event, []).append({k: v for k, v in message.items() if k not in ("msg", "event_id")})
            return
        self._following.pop(event)
        try:
            self._keep(session, message, following, notices.pop(event, ()))
        finally:
            self._landed(following[0])

    def _keep(self, session: str, message: dict, following: tuple, notices) -> None:
        """A followed event's successful completion, kept as the answer to its inputs."""
        if not message.get("success"):
            return
        key, root, fn_index = following
        blocks, fn = self.blocks, self._cacheable[fn_index]
        output = message["output"]
        if output.get("is_generating") or output.get("render_config"):
            return
        state = blocks.state_holder[session] if session in blocks.state_holder else None
        stateful = [block for block in fn.outputs if block.stateful]
        if stateful and state is None:
            return
        body = orjson.dumps(output)
        updates = tuple((block._id, {k: v for k, v in value.items() if k not in ("value", "__type__")})
                        for block, value in zip(fn.outputs, output.get("data", []))
                        if isinstance(value, dict) and value.get("__type__") == "update")
        self.kept.put(key, KeptEvent(
            parts=tuple(body.split(LINK % root)), notices=tuple(notices),
            state=tuple((block._id, copy.deepcopy(state[block._id])) for block in stateful),
            updates=updates,
            files=tuple(Path(orjson.loads(b'"' + p + b'"')) for p in FILE_PATH.findall(body))))

    def status(self) -> dict:
        return {"answers": len(self.kept), "bytes": self.kept.bytes, "hits": self.kept.hits,
                "misses": self.kept.misses, "refused_repeats": self.refused, "coalesced": self.coalesced}


def check_gradio(blocks) -> None:
    """What this middleware reads and writes of Gradio 6.31's private structures is there (a PatchError otherwise,
    ui/gradio_check.py): the served Blocks' queue with each session's stream of messages, the messages' fields as the
    kept ones are made, and a session's state (whose fields ui/patches.py checks)."""
    from gradio.server_messages import ServerMessage

    patch = "queue-streams"
    fields(patch, blocks, ("_queue", "state_holder", "blocks", "fns"), "the Blocks")
    fields(patch, blocks._queue, ("pending_message_lock", "pending_messages_per_session", "pending_event_ids_session"),
           "gradio.queueing.Queue")
    for message, needed in ((ProcessCompletedMessage, {"msg", "event_id", "output", "success"}),
                            (LogMessage, {"msg", "event_id", "log", "level", "duration", "visible", "title"})):
        if missing := needed - set(message.model_fields):
            raise PatchError(patch, f"{message.__name__} has no field {', '.join(sorted(missing))}")
    if (ServerMessage.process_completed, ServerMessage.log) != ("process_completed", "log"):
        raise PatchError(patch, "the stream's messages are no longer named process_completed and log")


def _posted(body: bytes) -> dict | None:
    """A join's body when it is one: {"fn_index": int, "data": [...], "session_hash": str, ...}."""
    if len(body) > MAX_BODY:
        return None
    try:
        posted = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not (isinstance(posted, dict) and isinstance(posted.get("fn_index"), int)
            and isinstance(posted.get("data"), list)
            and isinstance(posted.get("session_hash"), str) and posted["session_hash"]):
        return None
    return posted
