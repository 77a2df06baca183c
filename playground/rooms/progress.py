"""A room's workshop progress: what the lecturer's cockpit shows of the students walking a workshop in the room.

A student joins the room with a nickname (anonymous: no account, nothing personal asked) and their page records,
as they walk (ui/workshop_room.py): the step they are on and every step they reached, their answer to a step's
question with whether it was right (answering again replaces it: the last answer wins, counted once), and how many
of a step's hints they asked for. Each record is one transaction through `Database.batched`, committed before the
call returns, as a quiz answer is (polls.answer): an acknowledged record is durable.

`cockpit(code, key)` is the lecturer's view of it all as plain JSON: who joined, where each is, the funnel per step
(reached / answered / correct), each question's answer distribution and who asked for a hint. The lecturer may
reveal a step's answer (`reveal`): the students' pages then show it, and the step takes no more answers (its
distribution stays the one the class answered, as a quiz's histogram does). `export` gives the same data as rows
for CSV; `delete` removes every row the room holds, the room with them.

A nickname is text: at most MAX_NICKNAME characters, printable, with no `<` or `>` (refused, so nothing a student
types can be read as HTML on the projected cockpit, which escapes it too).
"""

from __future__ import annotations

import csv
import io
import time
from collections import Counter, defaultdict
from pathlib import Path

from playground import polls
from playground.rooms.database import RoomError, database
from playground.rooms.migrations import ROOM_TABLES

MAX_NICKNAME = 24
MAX_STUDENTS = 500                 # per room: the lecture hall's 200 and room to spare
MAX_WORKSHOP_ID = 80
MAX_STEP = 100                     # analysis/workshops.MAX_STEPS
MAX_ANSWER_CHARS = 80              # of an answer as the cockpit keeps and shows it
MAX_WORKSHOP_TEXT = 200_000        # a workshop file's characters (analysis/workshops.MAX_FILE)


def nickname(text) -> str:
    """A nickname as typed, its spaces collapsed; refused (a RoomError saying why) when empty, too long, or HTML."""
    if not isinstance(text, str):
        raise RoomError("A nickname is text: a first name or any name you like.")
    name = " ".join(text.split())
    if not name:
        raise RoomError("Type a nickname first: any name you like (no account, nothing personal).")
    if len(name) > MAX_NICKNAME:
        raise RoomError(f"A nickname has at most {MAX_NICKNAME} characters (yours has {len(name):,}).")
    if "<" in name or ">" in name or not name.isprintable():
        raise RoomError("A nickname is plain text: no HTML (< or >) and no control characters.")
    return name


def _where(workshop, step) -> tuple[str, int]:
    workshop = str(workshop or "")
    if not workshop or len(workshop) > MAX_WORKSHOP_ID or not workshop.isprintable():
        raise RoomError(f"A workshop is named by its id (1 to {MAX_WORKSHOP_ID} characters).")
    try:
        step = int(step)
    except (TypeError, ValueError, OverflowError):
        raise RoomError(f"A step is a number from 1 to {MAX_STEP}.") from None
    if not 1 <= step <= MAX_STEP:
        raise RoomError(f"A step is a number from 1 to {MAX_STEP}, not {step}.")
    return workshop, step


def _lecturer(tx, code: str, key, now: float, what: str) -> float:
    """The room's creation time, once `key` is shown to be its key; else a RoomError naming what was refused."""
    room_key, created, _ = polls.check_room(tx, code, now)
    if not polls.owner(key, room_key):
        raise RoomError(f"Only the page that opened room {code} can {what}: it needs the room's key.")
    return created


def join(code, session: str, name, path: Path | str | None = None, now: float | None = None) -> dict:
    """This browser session joins the room's workshop as `name` (joining again changes the nickname only)."""
    now = time.time() if now is None else now
    code, name = polls.normalise_code(code), nickname(name)
    if not session:
        raise RoomError("Progress is kept per browser session; this request has none.")

    def write(tx) -> dict:
        tx.lock(f"room:{code}")             # the count below and the insert; a delete of the room before or after
        polls.check_room(tx, code, now)
        if not tx.one("SELECT 1 FROM students WHERE code = ? AND session = ?", (code, session)):
            (n,) = tx.one("SELECT COUNT(*) FROM students WHERE code = ?", (code,))
            if n >= MAX_STUDENTS:
                raise RoomError(f"Room {code} already has {MAX_STUDENTS} students.")
        tx.run("INSERT INTO students (code, session, nickname, joined, seen) VALUES (?, ?, ?, ?, ?) "
               "ON CONFLICT (code, session) DO UPDATE SET nickname = excluded.nickname, seen = excluded.seen",
               (code, session, name, now, now))
        return {"room": code, "nickname": name}

    return database(path).batched(write, order=code)


def _record(code, session: str, workshop, step, path, now, check=None, more=None) -> dict:
    """The student is on `step` of `workshop` (reached, and their place); `more(tx, ...)` adds an answer or a hint,
    once `check(tx, ...)` let it. Every refusal comes before the first write (Database.batched needs it so)."""
    now = time.time() if now is None else now
    code, (workshop, step) = polls.normalise_code(code), _where(workshop, step)

    def write(tx) -> dict:
        tx.lock(f"room:{code}")             # a reveal or a delete of the room is wholly before or after this record
        polls.check_room(tx, code, now)
        if not session or not tx.one("SELECT 1 FROM students WHERE code = ? AND session = ?", (code, session)):
            raise RoomError(f"Join room {code} with a nickname first: your progress is kept under it.")
        if check is not None:
            check(tx, code, workshop, step)
        tx.run("UPDATE students SET workshop = ?, step = ?, seen = ? WHERE code = ? AND session = ?",
               (workshop, step, now, code, session))
        tx.run("INSERT INTO reached VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
               (code, session, workshop, step, now))
        if more is not None:
            more(tx, code, workshop, step, now)
        return {"room": code, "workshop": workshop, "step": step}

    return database(path).batched(write, order=code)


def reach(code, session: str, workshop, step, path: Path | str | None = None, now: float | None = None) -> dict:
    """The student opened `step` (counted from 1) of `workshop`."""
    return _record(code, session, workshop, step, path, now)


def answered(code, session: str, workshop, step, answer, correct: bool, path: Path | str | None = None,
             now: float | None = None) -> dict:
    """The student's answer to the step's question and whether it was right; the last answer wins. A step whose
    answer the lecturer revealed takes no more (its distribution stays the one the class answered)."""
    value = " ".join("".join(ch for ch in str(answer) if ch.isprintable() or ch.isspace()).split())
    value = value[:MAX_ANSWER_CHARS]                # a control character (NUL) is no part of an answer
    if not value:
        raise RoomError("Your answer is empty: give an answer first.")

    def check(tx, code, workshop, step):    # under the room's lock (_record), as a quiz answer's check is
        if _revealed(tx, code, workshop, step):
            raise RoomError("The lecturer has revealed this step's answer, so your answer is no longer counted.")

    def more(tx, code, workshop, step, now):
        tx.run("INSERT INTO step_answers VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (code, session, workshop, step) "
               "DO UPDATE SET answer = excluded.answer, correct = excluded.correct, at = excluded.at",
               (code, session, workshop, step, value, int(bool(correct)), now))

    return {**_record(code, session, workshop, step, path, now, check, more), "answer": value, "correct": bool(correct)}


def hinted(code, session: str, workshop, step, shown, path: Path | str | None = None,
           now: float | None = None) -> dict:
    """The student asked for hints of the step: `shown` of them are on their screen (the count only grows)."""
    try:
        shown = max(1, int(shown))
    except (TypeError, ValueError, OverflowError):
        raise RoomError("`shown` is how many of the step's hints are on the student's screen.") from None

    def more(tx, code, workshop, step, now):
        tx.run("INSERT INTO hints VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (code, session, workshop, step) "
               "DO UPDATE SET at = excluded.at, "
               "shown = CASE WHEN excluded.shown > hints.shown THEN excluded.shown ELSE hints.shown END",
               (code, session, workshop, step, shown, now))

    return {**_record(code, session, workshop, step, path, now, more=more), "hints": shown}


def _revealed(tx, code: str, workshop: str, step: int) -> bool:
    return tx.one("SELECT 1 FROM step_revealed WHERE code = ? AND workshop = ? AND step = ?",
                  (code, workshop, step)) is not None


def reveal(code, key, workshop, step, path: Path | str | None = None, now: float | None = None) -> dict:
    """The lecturer reveals a step's answer to the room: the students' pages show it; the step takes no more answers."""
    now = time.time() if now is None else now
    code, (workshop, step) = polls.normalise_code(code), _where(workshop, step)
    with database(path).write() as tx:
        _lecturer(tx, code, key, now, "reveal a step's answer")
        tx.lock(f"room:{code}")             # after every answer already let in, before any other
        tx.run("INSERT INTO step_revealed VALUES (?, ?, ?) ON CONFLICT DO NOTHING", (code, workshop, step))
    return {"room": code, "workshop": workshop, "step": step, "revealed": True}


def revealed(code, workshop, path: Path | str | None = None, now: float | None = None) -> list[int]:
    """The steps of `workshop` whose answer the room's lecturer revealed (anyone in the room may ask)."""
    now = time.time() if now is None else now
    code, (workshop, _) = polls.normalise_code(code), _where(workshop, 1)
    with database(path).read() as tx:
        polls.check_room(tx, code, now)
        return sorted(s for (s,) in tx.all("SELECT step FROM step_revealed WHERE code = ? AND workshop = ?",
                                           (code, workshop)))


def set_workshop(code, key, text, path: Path | str | None = None, now: float | None = None) -> dict:
    """The room's workshop (its lecturer only): a workshop file's text, validated by the caller (the UI checks its
    views and computes its tools' answers; this package knows nothing of either), '' for none. Kept with the room,
    so a student on any copy of the app sharing this database walks the same workshop."""
    now = time.time() if now is None else now
    code, text = polls.normalise_code(code), text if isinstance(text, str) else ""
    if len(text) > MAX_WORKSHOP_TEXT:
        raise RoomError(f"A workshop file has at most {MAX_WORKSHOP_TEXT:,} characters (this one {len(text):,}).")
    with database(path).write() as tx:
        _lecturer(tx, code, key, now, "give it a workshop")
        tx.run("UPDATE rooms SET workshop = ? WHERE code = ?", (text, code))
    return {"room": code, "chars": len(text)}


def workshop_of(code, path: Path | str | None = None, now: float | None = None) -> str:
    """The text of the workshop the room's lecturer gave it ('' for none): anyone with the code may read it."""
    now = time.time() if now is None else now
    code = polls.normalise_code(code)
    with database(path).read() as tx:
        polls.check_room(tx, code, now)
        return tx.one("SELECT workshop FROM rooms WHERE code = ?", (code,))[0]


def _rows(tx, code: str) -> dict:
    """Every progress row of the room, as tuples."""
    return {
        "students": tx.all("SELECT session, nickname, workshop, step, joined, seen FROM students WHERE code = ? "
                           "ORDER BY joined, nickname", (code,)),
        "reached": tx.all("SELECT session, workshop, step FROM reached WHERE code = ?", (code,)),
        "answers": tx.all("SELECT session, workshop, step, answer, correct, at FROM step_answers WHERE code = ?",
                          (code,)),
        "hints": tx.all("SELECT session, workshop, step, shown FROM hints WHERE code = ?", (code,)),
        "revealed": tx.all("SELECT workshop, step FROM step_revealed WHERE code = ?", (code,)),
    }


def _funnel(rows: dict, names: dict) -> list[dict]:
    """Per workshop, per step from 1 to the last any student reached: the funnel, the answers, the hints."""
    reached, answers, hints = Counter(), defaultdict(list), defaultdict(list)
    for _, wid, step in rows["reached"]:
        reached[wid, step] += 1
    for session, wid, step, value, correct, _ in rows["answers"]:
        answers[wid, step].append((value, bool(correct)))
    for session, wid, step, shown in rows["hints"]:
        hints[wid, step].append({"nickname": names.get(session, "?"), "hints": shown})
    shown_answers = set(map(tuple, rows["revealed"]))
    workshops = sorted({wid for wid, _ in reached} | {wid for wid, _ in answers})
    out = []
    for wid in workshops:
        last = max(step for w, step in [*reached, *answers] if w == wid)
        steps = []
        for step in range(1, last + 1):
            given = answers[wid, step]
            steps.append({"step": step, "reached": reached[wid, step], "answered": len(given),
                          "correct": sum(c for _, c in given),
                          "answers": dict(Counter(v for v, _ in given).most_common()),
                          "hints": sorted(hints[wid, step], key=lambda h: h["nickname"]),
                          "revealed": (wid, step) in shown_answers})
        out.append({"workshop": wid, "steps": steps})
    return out


def _students(rows: dict, now: float) -> list[dict]:
    answered_, right, hints = Counter(), Counter(), Counter()
    for session, *_, correct, _ in rows["answers"]:
        answered_[session] += 1
        right[session] += int(bool(correct))
    for session, *_, shown in rows["hints"]:
        hints[session] += shown
    return [{"nickname": name, "workshop": wid, "step": step, "answered": answered_[session],
             "correct": right[session], "hints": hints[session], "seen_s_ago": max(0, int(now - seen))}
            for session, name, wid, step, _, seen in rows["students"]]


def cockpit(code, key, path: Path | str | None = None, now: float | None = None) -> dict:
    """The lecturer's view of the room (its key): students joined, where each is, the funnel per step, each
    question's answer distribution, who asked for a hint. Plain JSON."""
    now = time.time() if now is None else now
    code = polls.normalise_code(code)
    with database(path).read() as tx:
        created = _lecturer(tx, code, key, now, "see its cockpit")
        rows = _rows(tx, code)
    names = {session: name for session, name, *_ in rows["students"]}
    return {"room": code, "joined": len(rows["students"]), "students": _students(rows, now),
            "workshops": _funnel(rows, names), "closes_in_s": max(0, int(created + polls.ROOM_SECONDS - now))}


def export(code, key, path: Path | str | None = None, now: float | None = None) -> dict:
    """The room's results for the lecturer (its key): the cockpit's data, and one row per student and step
    answered (`answers`, for the per-question CSV). Students are named by nickname only."""
    now = time.time() if now is None else now
    code = polls.normalise_code(code)
    with database(path).read() as tx:
        _lecturer(tx, code, key, now, "export its results")
        rows = _rows(tx, code)
    names = {session: name for session, name, *_ in rows["students"]}
    answers = sorted(({"nickname": names.get(s, "?"), "workshop": wid, "step": step, "answer": value,
                       "correct": bool(correct)} for s, wid, step, value, correct, _ in rows["answers"]),
                     key=lambda r: (r["workshop"], r["step"], r["nickname"]))
    return {"room": code, "joined": len(rows["students"]), "students": _students(rows, now),
            "workshops": _funnel(rows, names), "answers": answers}


def students_csv(data: dict) -> str:
    """One row per student: nickname, workshop, step, answered, correct, hints (from `export`)."""
    fields = ["nickname", "workshop", "step", "answered", "correct", "hints"]
    return _csv(fields, [{k: s[k] for k in fields} for s in data["students"]])


def questions_csv(data: dict) -> str:
    """One row per question (workshop and step): the funnel and the answer distribution (from `export`)."""
    fields = ["workshop", "step", "reached", "answered", "correct", "revealed", "answers", "hints"]
    rows = [{"workshop": w["workshop"], **{k: s[k] for k in ("step", "reached", "answered", "correct", "revealed")},
             "answers": "; ".join(f"{v}: {n}" for v, n in s["answers"].items()),
             "hints": "; ".join(h["nickname"] for h in s["hints"])}
            for w in data["workshops"] for s in w["steps"]]
    return _csv(fields, rows)


FORMULA = ("=", "+", "-", "@", "\t", "\r")   # OWASP's list of a cell's formula starts (an empty cell is none)


def _csv(fields: list[str], rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fields, lineterminator="\n")
    writer.writeheader()
    for row in rows:   # a spreadsheet runs a cell that starts with one of FORMULA as a formula: quoted as text instead
        writer.writerow({k: "'" + v if isinstance(v, str) and v.startswith(FORMULA) else v for k, v in row.items()})
    return out.getvalue()


def delete(code, key, path: Path | str | None = None, now: float | None = None) -> dict:
    """Every row the room holds, removed (its lecturer only): answers, progress, reveals and the room itself."""
    now = time.time() if now is None else now
    code = polls.normalise_code(code)
    removed = {}
    with database(path).write() as tx:
        tx.lock(f"room:{code}")             # no student's record half in (progress writes lock the room first)
        _lecturer(tx, code, key, now, "delete its data")
        for table in ROOM_TABLES:
            (removed[table],) = tx.one(f"SELECT COUNT(*) FROM {table} WHERE code = ?", (code,))
            tx.run(f"DELETE FROM {table} WHERE code = ?", (code,))
    return {"room": code, "deleted": True, "rows": removed}
