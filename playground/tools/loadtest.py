"""Many users at once: `gradio_client` sessions against a running app, for the load and soak tests.

Every named endpoint the app exposes is called, found through the API description, so a new endpoint is covered
without a change here. Each call passes the values the UI shows by default (the API description carries them), except
where those would take seconds (`CHEAP`) or need a room (the quiz's, follow-me's, the cockpit's: one shared room). An
endpoint needing a result of another in the same session (`NEEDS`) gets it first. A request that ends in an error, a
rejection included, counts as an error: the defaults are valid input."""

from __future__ import annotations

import asyncio
import random
import re
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from playground.tools.client import session

# Arguments that keep the slow endpoints to a fraction of a second (their full cost has its own tests).
CHEAP = {
    "/memory_experiment": {"max_k": 5, "steps": 10, "hidden_size": 8},  # trains three networks live
    "/lora_finetune": {"steps": 3},                                      # the fine-tuning tab trains live too
    "/sft": {"model": "gpt-shakespeare", "steps": 3}, "/dpo": {"model": "gpt-shakespeare", "steps": 3},
    "/classify_train": {"method": "bert-probe-cls"},                     # trains a classifier live (under a second)
    "/seq2seq_evaluate": {"per_length": 5},                              # every model on 5 lengths x 5 sources
    "/generate": {"max_new_tokens": 40}, "/compare_generate": {"max_new_tokens": 40},
}
NEEDS = {"/seq2seq_step": "/seq2seq"}  # shows a step of this session's last translation (gr.State)


@dataclass
class LoadResult:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # seconds, per endpoint
    errors: list[tuple[str, str]] = field(default_factory=list)                          # (endpoint, message)
    wall: float = 0.0

    @property
    def requests(self) -> int:
        return sum(map(len, self.latencies.values())) + len(self.errors)

    def percentiles(self) -> dict[str, tuple[float, float]]:
        """Per endpoint: (p50, p95) in seconds."""
        from playground.tools.bench import percentiles

        return {name: percentiles(samples) for name, samples in sorted(self.latencies.items())}


# what a page's fetch sends, and so the page-protocol drivers: a browser's join is held longer (ui/queuepath.py)
PAGE_HEADERS = {"sec-fetch-mode": "cors", "sec-fetch-site": "same-origin", "sec-fetch-dest": "empty"}


def endpoint_arguments(url: str) -> dict[str, dict]:
    """Every named endpoint of the app at `url` with its keyword arguments (or what makes them: a room to delete)."""
    api = session(url).view_api(return_format="dict", print_info=False)["named_endpoints"]
    calls = {}
    for name, endpoint in api.items():
        defaults = {p["parameter_name"]: p["parameter_default"] for p in endpoint["parameters"]}
        calls[name] = {**defaults, **CHEAP.get(name, {})}
    if "/poll_answer" in calls:  # the class quiz: one room for the whole test, answered and tallied by everyone
        opened = session(url).predict(api_name="/poll_open")[-1]
        room = opened["room"]
        calls["/follow_lead"] = {"room": room, "key": opened["key"], "view": "tab=attention"}
        calls["/follow_view"] = {"room": room, "since_version": -1}
        calls["/exercise"] = {"exercise_id": "tokens-bpe", "answer": "4"}
        calls["/poll_answer"] = {"room": room, "exercise_id": "tokens-bpe", "answer": "4"}
        calls["/poll_tally"] = {"room": room, "exercise_id": "tokens-bpe", "key": "", "reveal": False}
        for name in ("/cockpit", "/cockpit_export", "/cockpit_reveal", "/cockpit_workshop"):   # ui/cockpit.py
            calls[name] = {**calls[name], "room": room, "key": opened["key"]}
        calls["/cockpit_reveal"]["workshop"] = "load"
        calls["/cockpit_delete"] = lambda client: client.predict(api_name="/poll_open")[-1]   # {room, key}
    return calls


def run(url: str, users: int, requests_per_user: int, seed: int = 0) -> LoadResult:
    """`users` sessions at once, each sending `requests_per_user` requests one after another, over every
    endpoint in equal shares (in a seeded random order per user)."""
    calls = endpoint_arguments(url)
    names = sorted(calls)
    result, lock = LoadResult(), threading.Lock()

    def call(client, name: str) -> None:
        try:
            args, started = calls[name](client) if callable(calls[name]) else calls[name], time.perf_counter()
            client.predict(api_name=name, **args)
        except Exception as err:  # noqa: BLE001 - every failure is the finding
            with lock:
                result.errors.append((name, f"{type(err).__name__}: {str(err)[:300]}"))
            return
        with lock:
            result.latencies[name].append(time.perf_counter() - started)

    def user(u: int) -> None:
        client = session(url)
        order = [names[(u * requests_per_user + j) % len(names)] for j in range(requests_per_user)]
        random.Random(seed + u).shuffle(order)
        done: set[str] = set()
        for name in order:
            if name in NEEDS and NEEDS[name] not in done:
                call(client, NEEDS[name])
                done.add(NEEDS[name])
            call(client, name)
            done.add(name)

    started = time.perf_counter()
    with ThreadPoolExecutor(users) as pool:
        list(pool.map(user, range(users)))
    result.wall = time.perf_counter() - started
    return result


# ---------------------------------------------------------------------------------------------
# A lecture hall: many students over the plain HTTP API, each thinking between clicks

# The endpoints a class uses, and how a student's own sentence becomes each one's input
LECTURE_ENDPOINTS = ("tokenize", "attention", "fill_mask", "gradient_flow", "generate", "embed_words", "seq2seq",
                     "bpe_trace", "embed_sentences", "contextual")
STUDENT_SENTENCES = (
    "The bank by the river was closed.", "I deposited my money at the bank.", "Transformers read every word at once.",
    "Recurrent networks forget what they read long ago.", "Ceci n'est pas une pipe.", "Der Hund schläft im Garten.",
    "Tokenization splits words into pieces 🤖 sometimes oddly.", "unbelievably naïve users type strange things!!",
    "How many r's are in strawberry?", "My cat ignores me every single morning.",
    "Attention is all you need, they said.",
    "The quick brown fox jumps over the lazy dog.", "Numbers like 1234567 become many tokens.", "مرحبا بالعالم",
    "Students guess before they look at the answer.", "A lecture hall of two hundred people clicks at once.",
)
NUMBER_SOURCES = ("seven", "three hundred forty two", "ninety , eleven", "six hundred five , twelve , eight",
                  "one hundred , two hundred , three hundred", "forty four , fifty five , sixty six , seventy seven")


def own_input(name: str, sentence: str, rng: random.Random) -> dict:
    """A student's own input for endpoint `name`, made from `sentence` (the other arguments stay default)."""
    words = [w for w in sentence.replace(",", " ").replace(".", " ").split() if w.isalpha()] or ["word"]
    if name == "fill_mask":
        target = rng.choice(words)
        return {"text": sentence.replace(target, "[MASK]", 1)}
    if name == "generate":
        return {"prompt": sentence[:60]}
    if name == "embed_words":
        return {"words": ", ".join(dict.fromkeys([*(w.lower() for w in words), "dog", "cat", "king"]))}
    if name == "seq2seq":
        return {"source": rng.choice(NUMBER_SOURCES)}
    if name == "bpe_trace":
        return {"table": "\n".join(f"{w.lower()} {rng.randint(1, 9)}" for w in dict.fromkeys(words))}
    if name == "embed_sentences":
        return {"sentences": "\n".join(rng.sample(STUDENT_SENTENCES, 4))}
    if name == "contextual":
        return {"word": words[0].lower(), "sentences": f"{sentence}\n{sentence.lower()}"}
    return {"text": sentence}


@dataclass
class HallResult(LoadResult):
    own: int = 0              # requests with a student's own input
    seconds: float = 0.0      # the length of the class
    by_kind: dict = field(default_factory=lambda: {"defaults": [], "own": []})  # latencies of each kind
    log: list = field(default_factory=list)  # (seconds into the class, endpoint, kind, latency) of each answer
    server_cpu: float = 0.0   # seconds of CPU the server used during the class (the bench measures it)
    driver_cpu: float = 0.0   # and this driver, on the same machine


def lecture_hall(url: str, students: int = 200, think: float = 10.0, seconds: float = 120.0,
                 own_share: float = 0.3, seed: int = 0) -> HallResult:
    """`students` students for `seconds`, each sending a request, waiting for the answer, then thinking for
    an exponential time of mean `think` seconds: about students/think requests a second arrive. A request
    is a main endpoint chosen at random, with its default inputs, or with the student's own sentence
    (`own_share` of them). Plain HTTP, as a browser sends it: POST /gradio_api/call/<name>, then the answer
    as server-sent events. An error event or a failed request counts as an error."""
    import asyncio

    import httpx

    info = httpx.get(url + "gradio_api/info", timeout=60).json()["named_endpoints"]
    params = {name: [(p["parameter_name"], p["parameter_default"]) for p in info[f"/{name}"]["parameters"]]
              for name in LECTURE_ENDPOINTS}
    result = HallResult(seconds=seconds)

    async def call(client: httpx.AsyncClient, name: str, values: dict, kind: str) -> None:
        data = [values.get(key, default) for key, default in params[name]]
        started = time.perf_counter()
        try:
            event = (await client.post(f"gradio_api/call/{name}", json={"data": data})).json()["event_id"]
            answer = await client.get(f"gradio_api/call/{name}/{event}")
            if "event: complete" not in answer.text:
                result.errors.append((name, answer.text[-300:]))
                return
        except Exception as err:  # noqa: BLE001 - every failure is the finding
            result.errors.append((name, f"{type(err).__name__}: {str(err)[:300]}"))
            return
        result.latencies[name].append(time.perf_counter() - started)
        result.by_kind[kind].append(result.latencies[name][-1])
        result.log.append((started - opened, name, kind, result.latencies[name][-1]))

    async def student(client: httpx.AsyncClient, rng: random.Random, end: float) -> None:
        await asyncio.sleep(rng.expovariate(1 / think))  # students arrive over the first moments, not at once
        while time.perf_counter() < end:
            name = rng.choice(LECTURE_ENDPOINTS)
            own = rng.random() < own_share
            result.own += own
            await call(client, name, own_input(name, rng.choice(STUDENT_SENTENCES), rng) if own else {},
                       "own" if own else "defaults")
            await asyncio.sleep(min(rng.expovariate(1 / think), max(0.0, end - time.perf_counter())))

    async def hall() -> None:
        limits = httpx.Limits(max_connections=2 * students, max_keepalive_connections=students)
        async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
            end = time.perf_counter() + seconds
            await asyncio.gather(*(student(client, random.Random(seed * 100_003 + s), end) for s in range(students)))

    started = opened = time.perf_counter()
    asyncio.run(hall())
    result.wall = time.perf_counter() - started
    return result


# ---------------------------------------------------------------------------------------------
# A lecture hall as students really come: browsers, speaking the page's own protocol

def sentences(corpus: str, seed: int):
    """Endless new sentences of 4-12 words, windows of a real English text at random places: a class's own
    inputs, each new (the corpus sample has ~75,000 words, so two windows hardly ever coincide)."""
    words = corpus.split()
    rng = random.Random(seed)
    while True:
        n = rng.randint(4, 12)
        start = rng.randrange(len(words) - n)
        yield " ".join(words[start:start + n])


@dataclass
class Page:
    """What the page knows of the app: its events (fn_index, inputs, queued or not) and its components' values."""
    values: dict          # component id -> the value the page starts with
    events: dict          # fn_index -> the dependency as the config gives it
    by_name: dict         # api_name -> fn_index
    parameters: dict      # api_name -> the API's parameter names, in input order
    elem_ids: dict = field(default_factory=dict)  # a component's elem_id -> its id
    _scripts: list | None = None                   # what the page names (`scripts`)

    @classmethod
    def read(cls, client) -> "Page":
        config = client.get("config").json()
        info = client.get("gradio_api/info").json()["named_endpoints"]
        values = {c["id"]: c.get("props", {}).get("value") for c in config["components"]}
        events = {d["id"]: d for d in config["dependencies"]}
        by_name = {d["api_name"]: d["id"] for d in config["dependencies"] if d.get("api_name")}
        parameters = {name[1:]: [p["parameter_name"] for p in endpoint["parameters"]]
                      for name, endpoint in info.items()}
        elem_ids = {c["props"]["elem_id"]: c["id"] for c in config["components"] if c.get("props", {}).get("elem_id")}
        return cls(values, events, by_name, parameters, elem_ids)

    def scripts(self, sent: bytes) -> list[str]:
        """The page's own scripts and style sheets, read from the first page this driver fetched (decompressed once:
        every visitor gets the same page, see `_fetched`)."""
        if self._scripts is None:
            import brotli  # Gradio's own dependency
            import gzip

            try:
                page = brotli.decompress(sent)
            except brotli.error:
                page = gzip.decompress(sent) if sent[:2] == b"\x1f\x8b" else sent
            self._scripts = SCRIPT.findall(page.decode("utf-8", "replace"))
        return self._scripts

    def load_events(self) -> list[dict]:
        """The events a page sends when it opens (those with a server function)."""
        return [d for d in self.events.values()
                if d.get("backend_fn") and any(event == "load" for _, event in d["targets"])]

    def data(self, dependency: dict, own: dict | None = None) -> list:
        """The event's inputs as the page sends them: its components' values, with `own` by parameter name."""
        data = [self.values.get(i) for i in dependency["inputs"]]
        if own:
            names = self.parameters[dependency["api_name"]]
            for name, value in own.items():
                data[names.index(name)] = value
        return data


@dataclass
class BrowserHallResult(HallResult):
    page_opens: list = field(default_factory=list)     # seconds for GET / (the whole page)
    page_bytes: int = 0                                # bytes of one page as sent (compressed if the server does)
    load_events: list = field(default_factory=list)    # seconds of each event a page sends when it opens
    first_update: list = field(default_factory=list)   # streamed actions: seconds to their first shown step
    generations: list = field(default_factory=list)    # Generation's: (start, first token, end (s), tokens)

WAITING = (b"Waiting for a place", b"Starting beside", b"was asked for a moment ago")  # generation_tab.waiting's


SCRIPT = re.compile(r'(?:src|href)="\./(assets/[^"]+\.(?:js|css))"')  # the page's own scripts and style sheets


EVENT = re.compile(rb'"msg":"(\w+)","event_id":"([0-9a-f]+)"')  # how a stream message begins, as Gradio writes it


async def stream_messages(stream):
    """The session stream's messages as (kind, event id, the message's bytes), read as bytes: a 600 kB answer is
    neither decoded nor parsed here unless it is an error (the driver shares the server's cores; keep it light)."""
    buffer = bytearray()
    async for chunk in stream.aiter_bytes():
        buffer += chunk
        while (end := buffer.find(b"\n\n")) >= 0:
            message = bytes(buffer[:end])
            del buffer[:end + 2]
            named = EVENT.search(message, 0, 200)
            if message.startswith(b"data:") and named:
                yield named[1].decode(), named[2].decode(), message


def _failure(message: bytes) -> str | None:
    """The error a `process_completed` message reports, or None when it succeeded (its tail says which)."""
    if b'"success":true' in message[-400:]:
        return None
    import orjson

    parsed = orjson.loads(message[5:])
    return None if parsed.get("success") else str(parsed.get("output", {}).get("error", parsed))[:300]


async def queue_event(client, page: Page, fn_index: int, data: list, session: str,
                      event_data: dict | None = None,
                      generation: list | None = None) -> tuple[float | None, str | None]:
    """One event through the page's protocol: POST queue/join, then the session's stream (queue/data) up to
    the event's `process_completed`. (seconds to the first streamed step or None, an error or None). `generation`
    (a Generation event's): receives (when it started, seconds to its first token, to its end, its tokens)."""
    body = {"data": data, "event_data": event_data, "fn_index": fn_index, "trigger_id": None, "session_hash": session}
    started = time.perf_counter()
    joined = await client.post("gradio_api/queue/join", json=body)
    if joined.status_code != 200:
        return None, f"join {joined.status_code}: {joined.text[:200]}"
    event = joined.json()["event_id"]
    first = token = None
    async with client.stream("GET", "gradio_api/queue/data", params={"session_hash": session}) as stream:
        async for kind, about, message in stream_messages(stream):
            if about != event:
                continue
            if kind == "process_generating" and first is None:
                first = time.perf_counter() - started
            if kind == "process_generating" and token is None and not any(w in message for w in WAITING):
                token = time.perf_counter() - started
            if kind == "process_completed":
                if generation is not None:  # the first token (or the answer itself), the end, the JSON's steps
                    end = time.perf_counter() - started
                    generation.append((started, token or end, end, message.count(b'"p_model"')))
                return first, _failure(message)
    return first, "the stream closed before the event completed"


async def _fetched(client, path: str) -> bytes:
    """A file as a browser fetches it (compressed where the server compresses it), its bytes as sent: the driver does
    not decompress them, which is each student's browser's work on the student's own machine (a page is 3 MB once
    decompressed: 45 ms of the driver's CPU to decompress and read, 9 s of the two cores it shares with the server
    when 200 students open it within 10 s)."""
    async with client.stream("GET", path, headers={"accept-encoding": "gzip, deflate, br"}) as answer:
        answer.raise_for_status()
        return b"".join([chunk async for chunk in answer.aiter_raw()])


async def open_page(client, page: Page, session: str, result: BrowserHallResult) -> None:
    """What a browser sends when it opens the page: GET / (compressed if the server does) and the scripts it names,
    then the page's load events, each as the page sends it (through the queue, or run/predict for an event outside
    it). The ~90 chunks the frontend's script loads in turn are not fetched here (tests/test_browser_hall.py opens
    the page in real browsers)."""
    started = time.perf_counter()
    try:
        body = await _fetched(client, "")
        result.page_bytes = max(result.page_bytes, len(body))
        result.page_opens.append(time.perf_counter() - started)
        for script in page.scripts(body):
            await _fetched(client, script)
    except Exception as err:  # noqa: BLE001 - every failure is the finding
        result.errors.append(("GET /", f"{type(err).__name__}: {str(err)[:300]}"))
        return
    started = time.perf_counter()
    events = page.load_events()
    queued = [d for d in events if d.get("queue", True) is not False]

    async def unqueued(dependency) -> str | None:
        body = {"data": page.data(dependency), "event_data": None, "fn_index": dependency["id"], "trigger_id": None,
                "session_hash": session}
        answer = await client.post("gradio_api/run/predict", json=body)
        return None if answer.status_code == 200 else f"run/predict {answer.status_code}"

    try:  # as the page sends them: every event at once, the queued ones read from one stream of the session
        errors = await asyncio.gather(*(unqueued(d) for d in events if d not in queued),
                                      queue_events(client, [(d["id"], page.data(d)) for d in queued], session))
        error = next((e for e in errors if e), None)
    except Exception as err:  # noqa: BLE001
        error = f"{type(err).__name__}: {str(err)[:300]}"
    if error:
        result.errors.append(("the page's load events", error))
    else:
        result.load_events.append(time.perf_counter() - started)


async def queue_events(client, events: list[tuple[int, list]], session: str, event_data: dict | None = None,
                       took: dict[int, float] | None = None) -> str | None:
    """Several events joined at once by one session, then its stream read until every one has completed, as a page
    sends the listeners of one trigger (one stream per session: Gradio 6.31 fails a second stream of a session that
    is open at once). `took`, if given, gets each event's seconds from the joins to its answer, by fn_index."""
    bodies = [{"data": data, "event_data": event_data, "fn_index": fn_index, "trigger_id": None,
               "session_hash": session} for fn_index, data in events]
    started = time.perf_counter()
    joined = await asyncio.gather(*(client.post("gradio_api/queue/join", json=body) for body in bodies))
    refused = next((j for j in joined if j.status_code != 200), None)
    if refused is not None:
        return f"join {refused.status_code}: {refused.text[:200]}"
    pending = {j.json()["event_id"]: fn_index for j, (fn_index, _) in zip(joined, events)}
    for _ in range(5):  # the stream ends when the session has nothing pending; reopened if it ended early
        if not pending:
            return None
        async with client.stream("GET", "gradio_api/queue/data", params={"session_hash": session}) as stream:
            async for kind, about, message in stream_messages(stream):
                if kind == "process_completed" and about in pending:
                    if (error := _failure(message)) is not None:
                        return error
                    fn_index = pending.pop(about)
                    if took is not None:
                        took[fn_index] = time.perf_counter() - started
            if pending and stream.status_code != 200:
                return f"queue/data {stream.status_code}"
    return f"{len(pending)} events never completed" if pending else None


# Where a model is chosen among the hall's endpoints: the parameter that names it, and the name the app knows it by
MODEL_CHOICES = {"attention": ("model_key", {"smollm2": "smollm2"}),
                 "generate": ("model_name", {"smollm2": "smollm2-135m-instruct"})}


def browser_hall(url: str, students: int = 200, think: float = 10.0, seconds: float = 120.0,
                 own_share: float = 0.3, seed: int = 0, opening: float = 10.0,
                 model: str | None = None) -> BrowserHallResult:
    """`students` browsers for `seconds`. Each opens the page within the first `opening` seconds (GET /, then
    the events the page sends when it opens), then acts, waiting for each answer and thinking for an
    exponential time of mean `think` seconds: one of LECTURE_ENDPOINTS through the page's own protocol (queue/join
    and the session's stream), with the page's values or, for `own_share` of them, a sentence of the student's
    own, new each time (windows of the app's corpus sample). An error message or a failed request is an error. With
    `model` ("smollm2"), every attention and generation action chooses that model (MODEL_CHOICES), on any text."""
    import asyncio

    import httpx

    from playground import checkpoints

    corpus = (checkpoints.ASSETS_DIR / "corpus_sample.txt").read_text(encoding="utf-8")
    with httpx.Client(base_url=url, timeout=60) as sync_client:
        page = Page.read(sync_client)
    result = BrowserHallResult(seconds=seconds)

    async def act(client, name: str, own: dict | None, session: str, kind: str) -> None:
        dependency = page.events[page.by_name[name]]
        if model and name in MODEL_CHOICES:
            parameter, names = MODEL_CHOICES[name]
            own = {**(own or {}), parameter: names[model]}
        started = time.perf_counter()
        try:
            first, error = await queue_event(client, page, dependency["id"], page.data(dependency, own), session,
                                             generation=result.generations if name == "generate" else None)
        except Exception as err:  # noqa: BLE001 - every failure is the finding
            first, error = None, f"{type(err).__name__}: {str(err)[:300]}"
        took = time.perf_counter() - started
        if error:
            result.errors.append((name, error))
            return
        result.latencies[name].append(took)
        result.by_kind[kind].append(took)
        result.log.append((started - opened, name, kind, took))
        if first is not None:
            result.first_update.append(first)

    async def student(client, s: int, end: float) -> None:
        rng = random.Random(seed * 100_003 + s)
        own_sentences = sentences(corpus, seed * 100_003 + s)
        session = f"hall{seed}-{s}-{rng.getrandbits(32):08x}"
        await asyncio.sleep(rng.uniform(0, opening))
        await open_page(client, page, session, result)
        while time.perf_counter() < end:
            await asyncio.sleep(min(rng.expovariate(1 / think), max(0.0, end - time.perf_counter())))
            if time.perf_counter() >= end:
                break
            name = rng.choice(LECTURE_ENDPOINTS)
            own = rng.random() < own_share
            result.own += own
            await act(client, name, own_input(name, next(own_sentences), rng) if own else None, session,
                      "own" if own else "defaults")

    async def hall() -> None:
        limits = httpx.Limits(max_connections=4 * students, max_keepalive_connections=2 * students)
        async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits, headers=PAGE_HEADERS) as client:
            end = time.perf_counter() + seconds
            await asyncio.gather(*(student(client, s, end) for s in range(students)))

    started = opened = time.perf_counter()
    asyncio.run(hall())
    result.wall = time.perf_counter() - started
    return result
