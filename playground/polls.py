"""A class's answers: rooms that a lecturer opens and students join with a short code, stored in SQLite.

A room is a code that cannot be guessed by counting (6 letters and digits from `secrets`, ~887 million codes)
and a key that only the lecturer's page holds (it reveals the answers and moves the room from question to question).
A room carries its lecturer's current question, which the students' pages follow. A student's answer to a question
is kept once per browser session (answering again replaces it). Nobody reads a room's answers before its lecturer
reveals that question, and a revealed question takes no more answers, so the histogram the class saw stays the one
it answered; nobody reads a room without its code. Limits keep a public server safe: a room lives 3 hours, at most
1,000 rooms are open, at most 500 answers per question in a room, answers of at most 40 characters. The file
(`POLLS_DB`, beside the app by default) survives a restart; Python's own `sqlite3`, one connection per call, in WAL
mode so readers never wait for the writer. A file written before rooms carried their question gets the column on
first use (an ALTER TABLE in place; its rooms and answers are kept).
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import time
from collections import Counter
from contextlib import closing
from pathlib import Path

ROOM_SECONDS = 3 * 3600
MAX_ROOMS = 1_000
MAX_ANSWERS = 500                      # per question per room
MAX_ANSWER_CHARS = 40
MAX_QUESTION_CHARS = 64                # a question's id (analysis/exercises.py), not its text
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"   # no 0/O, 1/I/L: read aloud and typed from a projector
CODE_LENGTH = 6
DEFAULT_DB = Path(__file__).resolve().parent.parent / "polls.sqlite3"

# `question`: the lecturer's current question ('' until one is chosen)
SCHEMA = """
CREATE TABLE IF NOT EXISTS rooms (code TEXT PRIMARY KEY, key TEXT NOT NULL, created REAL NOT NULL,
                                  question TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS revealed (code TEXT NOT NULL, question TEXT NOT NULL, PRIMARY KEY (code, question));
CREATE TABLE IF NOT EXISTS answers (code TEXT NOT NULL, question TEXT NOT NULL, session TEXT NOT NULL,
                                    answer TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (code, question, session));
"""


class PollError(ValueError):
    """What a user did that a room refuses, said plainly (unknown or expired room, full room, ...)."""


def db_path() -> Path:
    return Path(os.environ.get("POLLS_DB", DEFAULT_DB))


_migrated: set[str] = set()   # the files this process has checked for the columns SCHEMA added since


def _connect(path: Path | None = None) -> sqlite3.Connection:
    path = path or db_path()
    con = sqlite3.connect(path, timeout=10, isolation_level=None)   # autocommit; BEGIN when needed
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA busy_timeout=10000")
    con.executescript(SCHEMA)
    if str(path) not in _migrated:
        _migrate(con)
        _migrated.add(str(path))
    return con


def _migrate(con: sqlite3.Connection) -> None:
    """A file from before rooms carried a question: CREATE TABLE IF NOT EXISTS leaves its table as it was, so the
    column is added in place (its rooms get '': no question yet)."""
    columns = {row[1] for row in con.execute("PRAGMA table_info(rooms)")}
    if "question" not in columns:
        try:
            con.execute("ALTER TABLE rooms ADD COLUMN question TEXT NOT NULL DEFAULT ''")
        except sqlite3.OperationalError as err:   # another process added it first
            if "duplicate column" not in str(err):
                raise


def _purge(con: sqlite3.Connection, now: float) -> None:
    """Expired rooms go, with their answers."""
    old = now - ROOM_SECONDS
    con.execute("DELETE FROM answers WHERE code IN (SELECT code FROM rooms WHERE created < ?)", (old,))
    con.execute("DELETE FROM revealed WHERE code IN (SELECT code FROM rooms WHERE created < ?)", (old,))
    con.execute("DELETE FROM rooms WHERE created < ?", (old,))


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


def open_room(path: Path | None = None, now: float | None = None, question: str = "") -> tuple[str, str]:
    """A new room: (code, key). The key reveals answers and moves the room to a question; only the page that opened
    the room holds it. `question`: the one the room starts on ('' for none yet)."""
    now = time.time() if now is None else now
    question = _question(question)
    with closing(_connect(path)) as con:
        con.execute("BEGIN IMMEDIATE")
        try:
            _purge(con, now)
            (n,) = con.execute("SELECT COUNT(*) FROM rooms").fetchone()
            if n >= MAX_ROOMS:
                raise PollError(f"{MAX_ROOMS:,} rooms are open on this server; try again when one closes "
                                f"(rooms close after {ROOM_SECONDS // 3600} hours).")
            while True:
                code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
                if not con.execute("SELECT 1 FROM rooms WHERE code = ?", (code,)).fetchone():
                    break
            key = secrets.token_urlsafe(16)
            con.execute("INSERT INTO rooms (code, key, created, question) VALUES (?, ?, ?, ?)",
                        (code, key, now, question))
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return code, key


def _room(con: sqlite3.Connection, code: str, now: float) -> tuple[str, float, str]:
    """The open room's (key, created, question). An expired room is told apart from a mistyped code until the next
    room opened purges it."""
    row = con.execute("SELECT key, created, question FROM rooms WHERE code = ?", (code,)).fetchone()
    if row is None:
        raise PollError(no_room(code))
    if row[1] < now - ROOM_SECONDS:
        raise PollError(f"Room {code} has closed: rooms close {ROOM_SECONDS // 3600} hours after they open. "
                        "Ask your lecturer for a new code.")
    return row


def _owner(key, room_key: str) -> bool:
    return bool(key) and secrets.compare_digest(str(key), room_key)


def _revealed(con: sqlite3.Connection, code: str, question: str) -> bool:
    return con.execute("SELECT 1 FROM revealed WHERE code = ? AND question = ?",
                       (code, question)).fetchone() is not None


def _count(con: sqlite3.Connection, code: str, question: str) -> int:
    return con.execute("SELECT COUNT(*) FROM answers WHERE code = ? AND question = ?", (code, question)).fetchone()[0]


def set_question(code, key: str, question: str, path: Path | None = None, now: float | None = None) -> dict:
    """Move a room to a question (its lecturer only): the students' pages follow it. Returns the room's status."""
    now = time.time() if now is None else now
    code, question = normalise_code(code), _question(question)
    with closing(_connect(path)) as con:
        room_key, _, _ = _room(con, code, now)
        if not _owner(key, room_key):
            raise PollError(f"Only the page that opened room {code} can change its question.")
        con.execute("UPDATE rooms SET question = ? WHERE code = ?", (question, code))
    return status(code, path, now)


def status(code, path: Path | None = None, now: float | None = None) -> dict:
    """What anyone with the code may know of a room, read every few seconds by each page in it: its current
    question, how many have answered it, whether it is revealed (and so final), how long the room stays open."""
    now = time.time() if now is None else now
    code = normalise_code(code)
    with closing(_connect(path)) as con:
        _, created, question = _room(con, code, now)
        answers = _count(con, code, question) if question else 0
        final = bool(question) and _revealed(con, code, question)
    return {"room": code, "question": question, "answers": answers, "final": final,
            "closes_in_s": max(0, int(created + ROOM_SECONDS - now))}


def answer(code, question: str, session: str, value: str, path: Path | None = None, now: float | None = None) -> int:
    """Record (or replace) this session's answer to a question; returns how many answers the question has.
    A revealed question takes no more: the class has seen its histogram, which must stay the one it answered."""
    now = time.time() if now is None else now
    code, question = normalise_code(code), _question(question)
    value = " ".join(str(value).split())[:MAX_ANSWER_CHARS]
    if not value:
        raise PollError("Your answer is empty: give an answer first.")
    if not session:
        raise PollError("Answers are counted per browser session; this request has none.")
    with closing(_connect(path)) as con:
        con.execute("BEGIN IMMEDIATE")
        try:
            _room(con, code, now)
            if _revealed(con, code, question):   # checked under the write lock: no answer slips in after a reveal
                raise PollError(f"Room {code} has revealed the answers to this question, so it takes no more: "
                                "the histogram stays the one the class answered.")
            n = _count(con, code, question)
            mine = con.execute("SELECT 1 FROM answers WHERE code = ? AND question = ? AND session = ?",
                               (code, question, session)).fetchone()
            if n >= MAX_ANSWERS and not mine:
                raise PollError(f"This question already has {MAX_ANSWERS} answers in room {code}.")
            con.execute("INSERT INTO answers VALUES (?, ?, ?, ?, ?) ON CONFLICT (code, question, session) "
                        "DO UPDATE SET answer = excluded.answer, at = excluded.at",
                        (code, question, session, value, now))
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return n + (0 if mine else 1)


def tally(code, question: str, key: str = "", reveal: bool = False, path: Path | None = None,
          now: float | None = None) -> dict:
    """The answers to a question as counts, for the room's lecturer (its key; `reveal` opens them to everyone
    in the room) or, once revealed, for anyone with the code. Before that, only how many have answered.
    `revealed`: the counts are shown to this caller; `final`: the question is revealed to the room (and closed)."""
    now = time.time() if now is None else now
    code, question = normalise_code(code), _question(question)
    with closing(_connect(path)) as con:
        room_key, created, _ = _room(con, code, now)
        owner = _owner(key, room_key)
        if reveal:
            if not owner:
                raise PollError("Only the page that opened the room can reveal its answers.")
            con.execute("INSERT OR IGNORE INTO revealed VALUES (?, ?)", (code, question))
        final = _revealed(con, code, question)
        shown = owner or final
        values = [v for (v,) in con.execute("SELECT answer FROM answers WHERE code = ? AND question = ?",
                                            (code, question))]
    counts = Counter(values)
    return {"room": code, "question": question, "answers": len(values), "revealed": shown, "final": final,
            "counts": dict(counts.most_common()) if shown else None,
            "closes_in_s": max(0, int(created + ROOM_SECONDS - now))}
