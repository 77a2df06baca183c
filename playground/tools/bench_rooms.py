"""The bench's class-database rows (`python -m playground.bench --rooms-only`): 200 students' answers arriving in the
same instant, follow-me's propagation (the lecturer's change until each of 200 waiting followers has it), and how far
the lecturer's live cockpit is behind 200 students walking a workshop, on the embedded SQLite file and, when
`DATABASE_URL` names one, on PostgreSQL. Measured at the store (playground/rooms, the calls the endpoints make, in
threads as the server's are), not through pages: tools/bench_follow.py measures follow me through the page's protocol.
"""

from __future__ import annotations

import asyncio
import os
import random
import tempfile
import threading
import time
from pathlib import Path

from playground import polls
from playground.rooms import follow, progress
from playground.rooms.watch import WAIT_SECONDS, RoomWatch
from playground.tools.bench_served import _p95

FOLLOW_SECONDS = 0.25   # ui/follow.FOLLOW_SECONDS: a following page's next ask after an answer (no gradio here)
COCKPIT_SECONDS = 1.0   # ui/cockpit.TICK_SECONDS: how often the lecturer's live cockpit asks the room


def answers_at_once(where: str, students: int = 200) -> tuple[float, int]:
    """`students` threads answer one question at the same instant (a barrier): the seconds until the last answer is
    committed, and how many answers the tally then counts."""
    code, key = polls.open_room(where)
    polls.status(code, where)                       # migrated and connected before the clock starts
    go = threading.Barrier(students + 1)
    done = []

    def student(i: int) -> None:
        go.wait()
        polls.answer(code, "q", f"s{i}", str(i % 5), where)
        done.append(time.perf_counter())

    threads = [threading.Thread(target=student, args=(i,)) for i in range(students)]
    for t in threads:
        t.start()
    go.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    return max(done) - start, polls.tally(code, "q", key, path=where)["answers"]


def propagation(where: str, followers: int = 200, changes: int = 5, gap: float = 2.0) -> list[float]:
    """The lecturer changes the view `changes` times, `gap` seconds apart; `followers` coroutines wait for the room's
    next view as following pages' polls do on one copy of the app (rooms/watch.py: held until the version moves, the
    view then read, the next ask FOLLOW_SECONDS later). Each follower's delay for each change: from the lecturer's
    publication returning to the follower having the view."""
    code, key = polls.open_room(where)
    published: dict[int, float] = {}
    delays: list[float] = []
    room_watch = RoomWatch(lambda room: follow.view(room, -1, where))

    async def follower(end: float) -> None:
        version = 0
        await asyncio.sleep(random.uniform(0, FOLLOW_SECONDS))
        while time.perf_counter() < end:
            await room_watch.wait(code, (version, version > 0), max(0.0, min(WAIT_SECONDS, end - time.perf_counter())))
            got = await asyncio.to_thread(follow.view, code, version, where)
            if got["view"] is not None and got["version"] in published:
                delays.append(time.perf_counter() - published[got["version"]])
            version = got["version"]
            await asyncio.sleep(FOLLOW_SECONDS)

    def lecturer() -> None:
        time.sleep(FOLLOW_SECONDS * 2)
        for i in range(changes):
            led = follow.lead(code, key, f"tab=attention&attention.layer={i}", where)
            published[led["version"]] = time.perf_counter()
            time.sleep(gap)

    async def room() -> None:
        end = time.perf_counter() + FOLLOW_SECONDS * 2 + changes * gap
        leading = threading.Thread(target=lecturer)
        leading.start()
        await asyncio.gather(*(follower(end) for _ in range(followers)))
        leading.join()

    asyncio.run(room())
    return sorted(delays)


def cockpit_lag(where: str, students: int = 200, steps: int = 5, seconds: float = 8.0) -> list[float]:
    """`students` threads walk a workshop of `steps` steps, each answering every step at random moments over
    `seconds`, while the lecturer's cockpit reads the room every COCKPIT_SECONDS. Each answer's delay: from its
    record returning (acknowledged) to the end of the first cockpit read that counts it."""
    code, key = polls.open_room(where)
    acked: dict[tuple[str, int], float] = {}
    delays: list[float] = []
    stop = threading.Event()

    def student(i: int) -> None:
        rng, name = random.Random(i), f"S{i}"
        progress.join(code, f"s{i}", name, where)
        for step, at in enumerate(sorted(rng.uniform(0, seconds) for _ in range(steps)), start=1):
            time.sleep(max(0.0, start + at - time.perf_counter()))
            progress.answered(code, f"s{i}", "bench", step, str(rng.randint(1, 4)), rng.random() < 0.5, where)
            acked[name, step] = time.perf_counter()

    def lecturer() -> None:
        seen: set[tuple[str, int]] = set()
        while not stop.is_set():
            data = progress.export(code, key, where)        # the cockpit's read, and the answers named per student
            now = time.perf_counter()
            for row in data["answers"]:
                got = (row["nickname"], row["step"])
                if got not in seen and got in acked:
                    seen.add(got)
                    delays.append(now - acked[got])
            time.sleep(COCKPIT_SECONDS)

    start = time.perf_counter() + 1.0                        # the joins first
    threads = [threading.Thread(target=student, args=(i,)) for i in range(students)]
    for t in threads:
        t.start()
    watcher = threading.Thread(target=lecturer)
    watcher.start()
    for t in threads:
        t.join()
    time.sleep(COCKPIT_SECONDS * 2)
    stop.set()
    watcher.join()
    return sorted(delays)


def rooms_rows(students: int = 200) -> list[tuple]:
    with tempfile.TemporaryDirectory(prefix="bench-rooms-") as folder:   # the SQLite file goes with the rows
        return _rows({"SQLite": str(Path(folder) / "rooms.sqlite3"),
                      **({"PostgreSQL": os.environ["DATABASE_URL"]} if os.environ.get("DATABASE_URL") else {})},
                     students)


def _rows(engines: dict[str, str], students: int) -> list[tuple]:
    rows = []
    for name, where in engines.items():
        seconds, counted = answers_at_once(where, students)
        rows.append((f"class database ({name}): {students} answers at the same instant, until the last is committed "
                     f"({counted} counted)", f"{seconds:.2f} s", "", "≤ 1 s", seconds <= 1 and counted == students))
        delays = propagation(where, students)
        p95 = _p95(delays)
        median = delays[len(delays) // 2]
        rows.append((f"follow me ({name}): a lecturer's change until each of {students} waiting followers has it "
                     f"({len(delays)} deliveries; one copy's watcher, no page)", f"{median:.2f} s",
                     f"{p95:.2f} s", "p95 ≤ 1 s", p95 is not None and p95 <= 1))
        rows.append(cockpit_row(name, where, students))
    return rows


def cockpit_row(name: str, where: str, students: int = 200, steps: int = 5) -> tuple:
    delays = cockpit_lag(where, students, steps)
    p95 = _p95(delays)
    median = delays[len(delays) // 2] if delays else None
    return (f"cockpit ({name}): a student's answer until the lecturer's live cockpit counts it ({students} students "
            f"× {steps} steps, {len(delays)} answers, read every {COCKPIT_SECONDS:g} s)",
            f"{median:.2f} s" if median is not None else "n/a", f"{p95:.2f} s" if p95 is not None else "n/a",
            "p95 ≤ 2 s", p95 is not None and p95 <= 2 and len(delays) == students * steps)
