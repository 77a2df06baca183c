"""Follow me as the students' pages meet it (`python -m playground.bench --follow-only`; issue #37): a room of 200
pages driven through the page's own protocol, on one copy of the served app and on two copies behind the documented
nginx (tools/balancer.py) sharing the class in PostgreSQL (when `DATABASE_URL` names one).

- The lecturer's page opens the room (its *Open a room* event, through Gradio's queue) and publishes each change of
  view as the page does: its hidden follow-publish element's select event, 150 ms after the change (the page's
  debounce, assets/follow.js), without the queue (run/predict), with the page's session.
- Each student's page joins the room (its *Join* event), ticks "Follow the lecturer", and then sends what an open page
  in a room sends: the follow-me timer's event every FOLLOW_SECONDS and the quiz's every QUIZ_SECONDS, each without
  the queue, and each tick skipped while the last is still unanswered (a timer's event is sent "once": Gradio's
  frontend drops a trigger while the event is pending). The server holds a follower's event until the room's view
  moves (rooms/watch.py), so a page asks about once per wait, not every FOLLOW_SECONDS.
- The lecturer changes the view CHANGES times (a new sentence on the Tokenization tab each time). A page that gets a
  new view asks for the view's figure, as the page's sentence change does: /tokenize through the queue with the
  lecturer's sentence (200 pages asking the same question: the answer cache computes it once).

Two delays per page and change, from the lecturer's change (before the debounce): until the page's poll answers with
the new view, and until the page has the view's figure. On two copies the pages leave from different local
addresses, so nginx's sticky hash spreads them over both copies; the lecturer's page is on whichever copy its
address reaches, and every follower on the other copy learns the change through PostgreSQL.

Three Chromium pages follow beside the 200, each timed until its sentence box shows the lecturer's sentence: first
drawing on the server's own two cores, then in a CPU group of the least weight (`background_group()`), where they
draw only on what the server and the driver leave: the nearest this one machine comes to the students' browsers on
computers of their own.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from playground.tools import balancer
from playground.tools.bench_served import _p95, served_app, wait_for_defaults
from playground.tools.loadtest import PAGE_HEADERS, Page, queue_event

FOLLOW_SECONDS = 0.25   # ui/follow.FOLLOW_SECONDS (not imported: the driver does not load the app)
QUIZ_SECONDS = 2.0      # ui/quiz_tab.TICK_SECONDS
DEBOUNCE = 0.15         # assets/follow.js: DEBOUNCE_MS
CHANGES, GAP = 6, 5.0   # the lecturer's changes of view, and the seconds between them
CPU_GROUP = "/sys/fs/cgroup/cpu/nlp-playground-browsers"   # background_group()
JOIN_SECONDS = 60.0     # the longest the lecturer waits for the class to join before changing the view
SENTENCES = ["The lecturer typed this first sentence.", "Attention lets every token look at every other one.",
             "A tokenizer splits unbelievable words into pieces.", "Students follow the lecturer's screen.",
             "Byte pair encoding merges the most frequent pairs.", "The projector shows the same view as yours."]


@dataclass
class FollowResult:
    reached: list = field(default_factory=list)   # seconds from a change to a page's poll answering with it
    drawn: list = field(default_factory=list)     # ... to that page having the view's figure
    browsed: list = field(default_factory=list)   # ... to a real browser's sentence box showing the lecturer's
    by_change: dict = field(default_factory=dict)  # change number -> its `reached` delays
    polls: int = 0
    errors: list = field(default_factory=list)
    copies: dict = field(default_factory=dict)    # copy address -> pages on it (through a balancer)


@dataclass
class _Events:
    """The fn_index and the outputs' places of the events the driver sends, found in the page's config."""
    page: Page
    open: int = 0
    join: int = 0
    publish: int = 0
    follow_tick: int = 0
    quiz_tick: int = 0
    tokenize: int = 0
    query_at: int = 0         # where the follow tick's answer holds "<version> <view>"

    @classmethod
    def read(cls, page: Page) -> "_Events":
        ids = page.elem_ids

        def by_target(element: str, event: str, output: str) -> int:
            return next(d["id"] for d in page.events.values() if d.get("backend_fn")
                        and any(e == event for _, e in d["targets"]) and ids[output] in d["outputs"]
                        and (element is None or any(t == ids[element] for t, _ in d["targets"])))

        found = cls(page, open=page.by_name["poll_open"], join=page.by_name["poll_join"],
                    publish=by_target("follow-publish", "select", "follow-lead-status"),
                    follow_tick=by_target(None, "tick", "follow-query"),
                    quiz_tick=by_target(None, "tick", "quiz-question"), tokenize=page.by_name["tokenize"])
        found.query_at = page.events[found.follow_tick]["outputs"].index(ids["follow-query"])
        return found


async def _completed(client, fn_index: int, data: list, session: str) -> list:
    """An event through the queue, its output data (queue_event's protocol, keeping the answer)."""
    import orjson

    from playground.tools.loadtest import stream_messages

    joined = await client.post("gradio_api/queue/join", json={"data": data, "event_data": None, "fn_index": fn_index,
                                                              "trigger_id": None, "session_hash": session})
    joined.raise_for_status()
    event = joined.json()["event_id"]
    async with client.stream("GET", "gradio_api/queue/data", params={"session_hash": session}) as stream:
        async for kind, about, message in stream_messages(stream):
            if about == event and kind == "process_completed":
                answer = orjson.loads(message[5:])
                if not answer.get("success"):
                    raise RuntimeError(str(answer.get("output"))[:300])
                return answer["output"]["data"]
    raise RuntimeError("the stream closed before the event completed")


async def _unqueued(client, fn_index: int, data: list, session: str, event_data: dict | None = None) -> list:
    answer = await client.post("gradio_api/run/predict", json={"data": data, "event_data": event_data,
                                                               "fn_index": fn_index, "trigger_id": None,
                                                               "session_hash": session})
    answer.raise_for_status()
    return answer.json()["data"]


def follow_class(url: str, followers: int = 200, changes: int = CHANGES, gap: float = GAP, seed: int = 0,
                 spread: bool = False, every: float = FOLLOW_SECONDS, browsers: int = 0,
                 background: bool = False) -> FollowResult:
    """`followers` pages following a lecturer's page on `url` through `changes` changes of view (module docstring),
    and `browsers` real Chromium pages beside them (`FollowRoom.browser`). `spread`: each page leaves from its own
    local address (through a balancer; the lecturer's from one that reaches another copy than the browsers'). `every`:
    the follow-me timer's interval. `background`: the Chromium pages in `background_group()`, standing in for
    browsers on the students' own computers."""
    import httpx

    with httpx.Client(base_url=url, timeout=60) as client:
        events = _Events.read(Page.read(client))
    room = FollowRoom(url, events, followers, changes, gap, seed, spread, every, browsers, background)
    asyncio.run(room.lecture())
    return room.result


class FollowRoom:
    """One class's run of follow_class: the lecturer's page, the followers' pages, the real browsers."""

    def __init__(self, url, events, followers, changes, gap, seed, spread, every, browsers, background=False):
        self.url, self.events, self.page = url, events, events.page
        self.followers, self.changes, self.gap, self.seed = followers, changes, gap, seed
        self.spread, self.every, self.browsers, self.background = spread, every, browsers, background
        self.result = FollowResult()
        self.changed: dict[int, float] = {}   # version -> when the lecturer changed the view (before the debounce)
        self.early: dict[int, list[float]] = {}   # version -> when pages had it, before the driver read its publish
        self.at: list[float] = []             # the same, by change
        self.ready: list[int] = []
        self.end = float("inf")               # when the pages stop asking (set after the last change)
        self.drawing: list[asyncio.Task] = []   # the followers' requests for the view's figure
        self.streams: dict[str, asyncio.Lock] = {}

    def client(self, address: str | None = None):
        import httpx

        transport = httpx.AsyncHTTPTransport(local_address=address) if address else None
        return httpx.AsyncClient(base_url=self.url, timeout=120, transport=transport, headers=PAGE_HEADERS,
                                 limits=httpx.Limits(max_connections=8, max_keepalive_connections=8))

    def address(self, i: int) -> str | None:
        return f"127.0.{1 + i // 250}.{1 + i % 250}" if self.spread else None

    async def ticking(self, client, fn_index: int, data: list, session: str, every: float, rng, seen):
        """A page's timer: its event every `every` seconds, a tick due while the last is unanswered dropped."""
        await asyncio.sleep(rng.uniform(0, every))
        next_at = time.perf_counter()
        while time.perf_counter() < self.end:
            try:
                answer = await _unqueued(client, fn_index, data, session)
                self.result.polls += 1
                if seen is not None:
                    await seen(client, session, answer)
            except Exception as err:  # noqa: BLE001 - every failure is the finding
                self.result.errors.append(("tick", f"{type(err).__name__}: {str(err)[:200]}"))
            next_at += every
            while next_at < time.perf_counter():
                next_at += every
            await asyncio.sleep(next_at - time.perf_counter())

    async def seen(self, client, session: str, answer: list) -> None:
        """A follower's poll answered: if with a new view, the delay, and the view's figure asked as the page does
        (beside its timer, which goes on). An answer that comes before the driver has read the lecturer's publish
        (its version unknown yet: the driver's loop is busy) is counted once it has: uncounted, a whole change was
        lost from the figures when three Chromium pages shared the cores (0 of 200 deliveries of one change)."""
        query = answer[self.events.query_at]
        if not isinstance(query, str) or not query:
            return
        version, _, view = query.partition(" ")
        version, arrived = int(version), time.perf_counter()
        if version in self.changed:
            self.count(version, arrived)
        else:
            self.early.setdefault(version, []).append(arrived)
        self.drawing.append(asyncio.create_task(self.draw(client, session, view, version), name=session))

    def count(self, version: int, arrived: float) -> None:
        started = self.changed[version]
        self.result.reached.append(arrived - started)
        self.result.by_change.setdefault(self.at.index(started) + 1, []).append(self.result.reached[-1])

    async def draw(self, client, session: str, view: str, version: int) -> None:
        text = dict(parse_qsl(view.lstrip("?"))).get("text", "")
        dependency = self.page.events[self.events.tokenize]
        async with self.streams.setdefault(session, asyncio.Lock()):   # a page reads one stream of its session
            _, error = await queue_event(client, self.page, self.events.tokenize,
                                         self.page.data(dependency, {"text": text}), session)
        if error:
            self.result.errors.append(("tokenize", error))
        elif version in self.changed:
            self.result.drawn.append(time.perf_counter() - self.changed[version])

    async def student(self, i: int, code: str) -> None:
        rng = random.Random(self.seed * 100_003 + i)
        session = f"follow{self.seed}-{i}-{rng.getrandbits(32):08x}"
        async with self.client(self.address(i)) as client:
            await _completed(client, self.events.join, [code, None], session)
            self.ready.append(i)
            await asyncio.gather(
                self.ticking(client, self.events.follow_tick, [None, True, None], session, self.every, rng, self.seen),
                self.ticking(client, self.events.quiz_tick, [None], session, QUIZ_SECONDS, rng, None))
            await asyncio.gather(*[task for task in self.drawing if task.get_name() == session])

    async def lecturer_address(self) -> str | None:
        """Through a balancer: a local address nginx sends to another copy than the browsers' (127.0.0.1)."""
        if not self.spread:
            return None

        async def copy_of(address: str | None) -> str:
            async with self.client(address) as client:
                return (await client.get("config")).headers.get("x-upstream", "")

        theirs = await copy_of("127.0.0.1")
        for i in range(2, 250):
            if await copy_of(f"127.0.250.{i}") != theirs:
                return f"127.0.250.{i}"
        return None

    async def lecture(self) -> None:
        async with self.client(await self.lecturer_address()) as client:
            session = f"lecturer{self.seed}"
            opened = await _completed(client, self.events.open, [None], session)
            code = opened[1]["value"] if isinstance(opened[1], dict) else opened[1]
            pages = [asyncio.create_task(self.student(i, code)) for i in range(self.followers)]
            watching = asyncio.create_task(self.browsing(code)) if self.browsers else None
            joining = time.perf_counter() + JOIN_SECONDS
            while len(self.ready) < self.followers + self.browsers and time.perf_counter() < joining:
                await asyncio.sleep(0.5)
            print(f"follow: {len(self.ready)} of {self.followers + self.browsers} pages in the room")
            await asyncio.sleep(max(2 * self.every, QUIZ_SECONDS))  # every page has asked for the room as it stands
            for k in range(self.changes):
                view = f"?tab=tokenization&text={SENTENCES[k % len(SENTENCES)].replace(' ', '+')}"
                self.at.append(time.perf_counter())
                await asyncio.sleep(DEBOUNCE)
                status = await _unqueued(client, self.events.publish, [None, True], session,
                                         {"index": 0, "value": view})
                version = int(str(status[0]).rsplit("change ", 1)[1].split(")")[0])
                self.changed[version] = self.at[-1]
                for arrived in self.early.pop(version, []):
                    self.count(version, arrived)
                await asyncio.sleep(self.gap - DEBOUNCE)
            self.end = time.perf_counter() + max(self.gap, 5.0)   # the pages go on a while, then leave
            await asyncio.gather(*pages, *([watching] if watching else []))

    async def browsing(self, code: str) -> None:
        """`browsers` real Chromium pages join the room, follow, and time each change until their sentence box shows
        the lecturer's sentence (`result.browsed`)."""
        import shutil
        import tempfile

        from playwright.async_api import async_playwright

        with tempfile.TemporaryDirectory() as folder:
            executable = shutil.which("chromium")
            if self.background:   # the group follow_rows made (background_group): the browser and its processes join it
                wrapper = os.path.join(folder, "chromium")
                with open(wrapper, "w", encoding="utf-8") as out:
                    out.write(f'#!/bin/sh\necho $$ > "{CPU_GROUP}/cgroup.procs"\nexec "{executable}" "$@"\n')
                os.chmod(wrapper, 0o755)
                executable = wrapper
            async with async_playwright() as p:
                chromium = await p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
                try:
                    await asyncio.gather(*(self.browser(chromium, code) for _ in range(self.browsers)))
                finally:
                    await chromium.close()

    async def browser(self, chromium, code: str) -> None:
        page = await (await chromium.new_context(viewport={"width": 1400, "height": 1000})).new_page()
        await page.goto(self.url + "?tab=class-quiz", timeout=120_000)
        await page.wait_for_selector("#quiz-question", timeout=120_000)
        await page.locator("#quiz-room textarea, #quiz-room input").first.fill(code)
        await page.locator("#quiz-join").click()
        await page.wait_for_function("() => (document.querySelector('#quiz-status')?.innerText || '')"
                                     ".includes('Joined')", timeout=60_000)
        await page.locator("#follow-on input").check()
        await page.wait_for_function("() => (document.querySelector('#follow-bar')?.innerText || '')"
                                     ".includes('Following room')", timeout=60_000)
        self.ready.append(-1)
        for k in range(self.changes):
            try:
                await page.wait_for_function("(s) => document.querySelector('#sentence textarea, #sentence input')"
                                             "?.value === s", arg=SENTENCES[k % len(SENTENCES)], polling="raf",
                                             timeout=60_000)
            except Exception as err:  # noqa: BLE001 - every failure is the finding
                self.result.errors.append(("browser", f"change {k + 1}: {type(err).__name__}: {str(err)[:200]}"))
                continue
            self.result.browsed.append(time.perf_counter() - self.at[k])


def follow_rows(followers: int = 200, browsers: int = 3) -> list[tuple]:
    """The rows of one copy (its own SQLite file) and, with nginx and `DATABASE_URL`, of two copies behind nginx:
    `followers` pages through the page's protocol, alone, then with `browsers` real Chromium pages beside them, then
    with those pages in the background (`background_group()`, where the machine has one). The Chromium pages draw
    every followed view on the server's own two cores, at the moment its answers go out, where a student's browser
    draws on the student's computer: in the background they draw on what the server and the driver leave, the
    nearest this machine comes to separate computers."""
    rows = []
    own = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    backgrounds = (False, True) if background_group() else (False,)
    ways = [(0, False)] + [(browsers, background) for background in backgrounds]
    if len(backgrounds) == 1:
        rows.append(("follow me with the Chromium pages in the background: not measured (needs a writable cgroup "
                     "v1 cpu controller)", "", "", "", None))
    with served_app(warm=True, env=own) as (url, _):
        for shown, background in ways:
            rows += _rows("one copy, SQLite", follow_class(url, followers, browsers=shown, background=background),
                          followers, shown, background)
    if balancer.NGINX and os.environ.get("DATABASE_URL"):
        with balancer.BalancedCopies(2, env={"DATABASE_URL": os.environ["DATABASE_URL"]}) as (url, copies):
            for copy in copies:                  # as a lecturer starts the copies before the class arrives
                wait_for_defaults(f"http://{copy}/")
            for shown, background in ways:
                rows += _rows("two copies behind nginx, PostgreSQL",
                              follow_class(url, followers, spread=True, browsers=shown, background=background),
                              followers, shown, background)
    else:
        rows.append(("follow me through two copies: not measured (needs nginx and DATABASE_URL)", "", "", "", None))
    return rows


def background_group() -> str | None:
    """A CPU group of the least weight (cgroup v1 `cpu.shares` 2, where a process's default is 1024) for the Chromium
    pages, or None where this machine has no writable cgroup v1 cpu controller: in it they get a core only when the
    server and the driver leave it idle. Niceness is not enough: Chromium run as root sets its processes' own."""
    if not os.path.exists(os.path.join(os.path.dirname(CPU_GROUP), "cpu.shares")):   # no such controller mounted
        return None
    try:
        os.makedirs(CPU_GROUP, exist_ok=True)
        with open(os.path.join(CPU_GROUP, "cpu.shares"), "w", encoding="ascii") as out:
            out.write("2")
    except OSError:
        return None
    return CPU_GROUP


def _rows(where: str, result: FollowResult, followers: int, browsers: int, background: bool = False) -> list[tuple]:
    rows, beside = [], f"{browsers} Chromium pages" + (" in the background" if background and browsers else "")
    for name, delays, pages in (("the page's poll has the view", result.reached, followers),
                                ("the page has the view's figure", result.drawn, followers),
                                ("a real browser's page shows the lecturer's sentence", result.browsed, browsers)):
        if not pages:
            continue
        delays, expected = sorted(delays), pages * CHANGES
        p95 = _p95(delays)
        budgeted = name == "the page's poll has the view"   # issue #37's budget: the view reaches the page
        rows.append((f"follow me ({where}; {followers} pages through the page's protocol, {beside}): "
                     f"a lecturer's change until {name} ({len(delays)} of {expected})",
                     f"{delays[len(delays) // 2]:.2f} s" if delays else "n/a",
                     f"{p95:.2f} s" if p95 is not None else "n/a", "p95 ≤ 1 s" if budgeted else "",
                     (p95 is not None and p95 <= 1 and len(delays) == expected and not result.errors)
                     if budgeted else None))
    for change, delays in sorted(result.by_change.items()):
        delays = sorted(delays)
        print(f"follow ({where}, {beside}) change {change}: {len(delays)} pages' polls had it, median "
              f"{delays[len(delays) // 2]:.2f} s, p95 {_p95(delays):.2f} s")
    for kind, message in result.errors[:5]:
        print(f"follow ({where}, {beside}) error: {kind}: {message}")
    return rows
