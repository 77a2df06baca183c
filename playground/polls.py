"""A class's answers: rooms that a lecturer opens and students join with a short code, in the class's database.

A room is a code that cannot be guessed by counting (6 letters and digits from `secrets`, ~887 million codes)
and a key that only the lecturer's page holds (it reveals the answers and moves the room from question to question).
A room carries its lecturer's current question, which the students' pages follow. A student's answer to a question
is kept once per browser session (answering again replaces it: the last answer wins). Nobody reads a room's answers
before its lecturer reveals that question, and a revealed question takes no more answers, so the histogram the class
saw stays the one it answered; nobody reads a room without its code. Limits keep a public server safe: a room lives
3 hours, at most 1,000 rooms are open, at most 500 answers per question in a room, answers of at most 40 characters.

The data lives in playground/rooms' store: the SQLite file `POLLS_DB` (beside the app by default), or PostgreSQL when
`DATABASE_URL` names one (several copies of the app then share a class). Every function's `path` names another
store: a SQLite file, or a postgresql:// URL. A write is committed before the function returns (an acknowledged
answer is durable); the schema is migrated on first use (rooms/migrations.py), a file from before kept in place.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from pathlib import Path

from playground.rooms.database import DEFAULT_DB, RoomError, configured, database  # noqa: F401 (DEFAULT_DB: as before)
from playground.rooms.migrations import ROOM_TABLES

ROOM_SECONDS = 3 * 3600
MAX_ROOMS = 1_000
MAX_ANSWERS = 500                      # per question per room
MAX_ANSWER_CHARS = 40
MAX_QUESTION_CHARS = 64                # a question's id (analysis/exercises.py), not its text
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"   # no 0/O, 1/I/L: read aloud and typed from a projector
CODE_LENGTH = 6

PollError = RoomError   # what a user did that a room refuses, said plainly (unknown or expired room, full room, ...)


def db_path() -> str:
    """Where the class's data lives (rooms/database.configured): a SQLite file or a postgresql:// URL."""
    return configured()


def _purge(tx, now: float) -> None:
    """Expired rooms go, with every row they hold (their answers, their students' workshop progress)."""
    old = now - ROOM_SECONDS
    for table in ROOM_TABLES:           # rooms last: the others find their rooms' codes there
        where = "created < ?" if table == "rooms" else "code IN (SELECT code FROM rooms WHERE created < ?)"
        tx.run(f"DELETE FROM {table} WHERE {where}", (old,))


def no_room(code: str) -> str:
    """What a student reads after typing a code that names no room: the likely cause is a misread screen."""
    return f"No room {code}: check the code your lecturer shows ({CODE_LENGTH} letters and digits)."


def normalise_code(code) -> str:
    """A code as typed from a projector (lower case, spaces, a dash) in its stored form; a code that cannot exist
    (wrong length, 0/O/1/I/L) is refused as a room that does not exist, which is what it is to a student."""
    code = str(code or "").strip().upper().replace(" ", "").replace("-", "")
    if len(code) != CODE_LENGTH or any(c not in CODE_ALPHABET for c in code):
        raise PollError(no_room(code[:2 * CODE_LENGTH] or "''"))
    return code


def _question(question) -> str:
    question = str(question or "")
    if len(question) > MAX_QUESTION_CHARS:
        raise PollError(f"A question is named by its id (at most {MAX_QUESTION_CHARS} characters).")
    return question


def open_room(path: Path | str | None = None, now: float | None = None, question: str = "") -> tuple[str, str]:
    """A new room: (code, key). The key reveals answers and moves the room to a question; only the page that opened
    the room holds it. `question`: the one the room starts on ('' for none yet)."""
    now = time.time() if now is None else now
    question = _question(question)
    with database(path).write() as tx:
        tx.lock("rooms")                         # the count below and the insert, one opener at a time
        _purge(tx, now)
        (n,) = tx.one("SELECT COUNT(*) FROM rooms")
        if n >= MAX_ROOMS:
            raise PollError(f"{MAX_ROOMS:,} rooms are open on this server; try again when one closes "
                            f"(rooms close after {ROOM_SECONDS // 3600} hours).")
        while True:
            code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
            if not tx.one("SELECT 1 FROM rooms WHERE code = ?", (code,)):
                break
        key = secrets.token_urlsafe(16)
        tx.run("INSERT INTO rooms (code, key, created, question) VALUES (?, ?, ?, ?)", (code, key, now, question))
    return code, key


def check_room(tx, code: str, now: float) -> tuple[str, float, str]:
    """The open room's (key, created, question). An expired room is told apart from a mistyped code until the next
    room opened purges it."""
    row = tx.one("SELECT key, created, question FROM rooms WHERE code = ?", (code,))
    if row is None:
        raise PollError(no_room(code))
    if row[1] < now - ROOM_SECONDS:
        raise PollError(f"Room {code} has closed: rooms close {ROOM_SECONDS // 3600} hours after they open. "
                        "Ask your lecturer for a new code.")
    return row


def owner(key, room_key: str) -> bool:
    """Whether `key` is the room's key (compared in constant time: a wrong key learns nothing of the right one)."""
    return bool(key) and secrets.compare_digest(str(key).encode(), room_key.encode())   # bytes: any text typed


def _revealed(tx, code: str, question: str) -> bool:
    return tx.one("SELECT 1 FROM revealed WHERE code = ? AND question = ?", (code, question)) is not None


def _count(tx, code: str, question: str) -> int:
    return tx.one("SELECT COUNT(*) FROM answers WHERE code = ? AND question = ?", (code, question))[0]


def set_question(code, key: str, question: str, path: Path | str | None = None, now: float | None = None) -> dict:
    """Move a room to a question (its lecturer only): the students' pages follow it. Returns the room's status."""
    now = time.time() if now is None else now
    code, question = normalise_code(code), _question(question)
    with database(path).write() as tx:
        room_key, _, _ = check_room(tx, code, now)
        if not owner(key, room_key):
            raise PollError(f"Only the page that opened room {code} can change its question.")
        tx.run("UPDATE rooms SET question = ? WHERE code = ?", (question, code))
    return status(code, path, now)


def status(code, path: Path | str | None = None, now: float | None = None) -> dict:
    """What anyone with the code may know of a room, read every few seconds by each page in it: its current
    question, how many have answered it, whether it is revealed (and so final), how long the room stays open."""
    now = time.time() if now is None else now
    code = normalise_code(code)
    with database(path).read() as tx:
        _, created, question = check_room(tx, code, now)
        answers = _count(tx, code, question) if question else 0
        final = bool(question) and _revealed(tx, code, question)
    return {"room": code, "question": question, "answers": answers, "final": final,
            "closes_in_s": max(0, int(created + ROOM_SECONDS - now))}


def answer(code, question: str, session: str, value: str, path: Path | str | None = None,
           now: float | None = None) -> int:
    """Record (or replace: the last answer wins) this session's answer to a question; returns how many answers the
    question has. Committed before it returns. A revealed question takes no more: the class has seen its histogram,
    which must stay the one it answered."""
    now = time.time() if now is None else now
    code, question = normalise_code(code), _question(question)
    value = " ".join(str(value).split())[:MAX_ANSWER_CHARS]
    if not value:
        raise PollError("Your answer is empty: give an answer first.")
    if not session:
        raise PollError("Answers are counted per browser session; this request has none.")

    def write(tx) -> int:
        tx.lock(f"room:{code}")             # the checks below and the write, one writer per room at a time (and a
        check_room(tx, code, now)           # room's deletion, rooms/progress.delete, wholly before or after)
        if _revealed(tx, code, question):   # checked under the lock: no answer slips in after a reveal
            raise PollError(f"Room {code} has revealed the answers to this question, so it takes no more: "
                            "the histogram stays the one the class answered.")
        n = _count(tx, code, question)
        mine = tx.one("SELECT 1 FROM answers WHERE code = ? AND question = ? AND session = ?",
                      (code, question, session))
        if n >= MAX_ANSWERS and not mine:
            raise PollError(f"This question already has {MAX_ANSWERS} answers in room {code}.")
        tx.run("INSERT INTO answers VALUES (?, ?, ?, ?, ?) ON CONFLICT (code, question, session) "
               "DO UPDATE SET answer = excluded.answer, at = excluded.at", (code, question, session, value, now))
        return n + (0 if mine else 1)

    return database(path).batched(write, order=code)   # committed with the answers arriving with it, then returned


def tally(code, question: str, key: str = "", reveal: bool = False, path: Path | str | None = None,
          now: float | None = None) -> dict:
    """The answers to a question as counts, for the room's lecturer (its key; `reveal` opens them to everyone
    in the room) or, once revealed, for anyone with the code. Before that, only how many have answered.
    `revealed`: the counts are shown to this caller; `final`: the question is revealed to the room (and closed)."""
    now = time.time() if now is None else now
    code, question = normalise_code(code), _question(question)
    with database(path).write() if reveal else database(path).read() as tx:
        room_key, created, _ = check_room(tx, code, now)
        is_owner = owner(key, room_key)
        if reveal:
            if not is_owner:
                raise PollError("Only the page that opened the room can reveal its answers.")
            tx.lock(f"room:{code}")         # after every answer already let in, before any other
            tx.run("INSERT INTO revealed VALUES (?, ?) ON CONFLICT DO NOTHING", (code, question))
        final = _revealed(tx, code, question)
        shown = is_owner or final
        values = [v for (v,) in tx.all("SELECT answer FROM answers WHERE code = ? AND question = ?",
                                       (code, question))]
    counts = Counter(values)
    return {"room": code, "question": question, "answers": len(values), "revealed": shown, "final": final,
            "counts": dict(counts.most_common()) if shown else None,
            "closes_in_s": max(0, int(created + ROOM_SECONDS - now))}
