"""A class's answers: rooms that a lecturer opens and students join with a short code, stored in SQLite.

A room is a code that cannot be guessed by counting (6 letters and digits from `secrets`, ~887 million codes)
and a key that only the lecturer's page holds (it reveals the answers). A student's answer to a question is
kept once per browser session (answering again replaces it). Nobody reads a room's answers before its lecturer
reveals that question; nobody reads a room without its code. Limits keep a public server safe: a room lives
3 hours, at most 1,000 rooms are open, at most 500 answers per question in a room, answers of at most 40
characters. The file (`POLLS_DB`, beside the app by default) survives a restart; Python's own `sqlite3`, one
connection per call, in WAL mode so readers never wait for the writer.
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
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"   # no 0/O, 1/I/L: read aloud and typed from a projector
CODE_LENGTH = 6
DEFAULT_DB = Path(__file__).resolve().parent.parent / "polls.sqlite3"

SCHEMA = """
CREATE TABLE IF NOT EXISTS rooms (code TEXT PRIMARY KEY, key TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS revealed (code TEXT NOT NULL, question TEXT NOT NULL, PRIMARY KEY (code, question));
CREATE TABLE IF NOT EXISTS answers (code TEXT NOT NULL, question TEXT NOT NULL, session TEXT NOT NULL,
                                    answer TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (code, question, session));
"""


class PollError(ValueError):
    """What a user did that a room refuses, said plainly (unknown or expired room, full room, ...)."""


def db_path() -> Path:
    return Path(os.environ.get("POLLS_DB", DEFAULT_DB))


def _connect(path: Path | None = None) -> sqlite3.Connection:
    con = sqlite3.connect(path or db_path(), timeout=10, isolation_level=None)   # autocommit; BEGIN when needed
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA busy_timeout=10000")
    con.executescript(SCHEMA)
    return con


def _purge(con: sqlite3.Connection, now: float) -> None:
    """Expired rooms go, with their answers."""
    old = now - ROOM_SECONDS
    con.execute("DELETE FROM answers WHERE code IN (SELECT code FROM rooms WHERE created < ?)", (old,))
    con.execute("DELETE FROM revealed WHERE code IN (SELECT code FROM rooms WHERE created < ?)", (old,))
    con.execute("DELETE FROM rooms WHERE created < ?", (old,))


def normalise_code(code) -> str:
    code = str(code or "").strip().upper().replace(" ", "").replace("-", "")
    if len(code) != CODE_LENGTH or any(c not in CODE_ALPHABET for c in code):
        raise PollError(f"A room code is {CODE_LENGTH} letters and digits, as the lecturer's screen shows it.")
    return code


def open_room(path: Path | None = None, now: float | None = None) -> tuple[str, str]:
    """A new room: (code, key). The key reveals answers; only the page that opened the room holds it."""
    now = time.time() if now is None else now
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
            con.execute("INSERT INTO rooms VALUES (?, ?, ?)", (code, key, now))
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return code, key


def _room(con: sqlite3.Connection, code: str, now: float) -> tuple[str, float]:
    row = con.execute("SELECT key, created FROM rooms WHERE code = ?", (code,)).fetchone()
    if row is None or row[1] < now - ROOM_SECONDS:
        raise PollError(f"There is no open room {code} (rooms close after {ROOM_SECONDS // 3600} hours).")
    return row


def answer(code, question: str, session: str, value: str, path: Path | None = None, now: float | None = None) -> int:
    """Record (or replace) this session's answer to a question; returns how many answers the question has."""
    now = time.time() if now is None else now
    code = normalise_code(code)
    value = " ".join(str(value).split())[:MAX_ANSWER_CHARS]
    if not value:
        raise PollError("Give an answer first.")
    if not session:
        raise PollError("Answers are counted per browser session; this request has none.")
    with closing(_connect(path)) as con:
        con.execute("BEGIN IMMEDIATE")
        try:
            _room(con, code, now)
            (n,) = con.execute("SELECT COUNT(*) FROM answers WHERE code = ? AND question = ?", (code, question)).fetchone()
            mine = con.execute("SELECT 1 FROM answers WHERE code = ? AND question = ? AND session = ?",
                               (code, question, session)).fetchone()
            if n >= MAX_ANSWERS and not mine:
                raise PollError(f"This question already has {MAX_ANSWERS} answers in room {code}.")
            con.execute("INSERT INTO answers VALUES (?, ?, ?, ?, ?) ON CONFLICT (code, question, session) "
                        "DO UPDATE SET answer = excluded.answer, at = excluded.at", (code, question, session, value, now))
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return n + (0 if mine else 1)


def tally(code, question: str, key: str = "", reveal: bool = False, path: Path | None = None,
          now: float | None = None) -> dict:
    """The answers to a question as counts, for the room's lecturer (its key; `reveal` opens them to everyone
    in the room) or, once revealed, for anyone with the code. Before that, only how many have answered."""
    now = time.time() if now is None else now
    code = normalise_code(code)
    with closing(_connect(path)) as con:
        room_key, created = _room(con, code, now)
        owner = bool(key) and secrets.compare_digest(str(key), room_key)
        if reveal:
            if not owner:
                raise PollError("Only the page that opened the room can reveal its answers.")
            con.execute("INSERT OR IGNORE INTO revealed VALUES (?, ?)", (code, question))
        shown = owner or con.execute("SELECT 1 FROM revealed WHERE code = ? AND question = ?",
                                     (code, question)).fetchone() is not None
        values = [v for (v,) in con.execute("SELECT answer FROM answers WHERE code = ? AND question = ?",
                                            (code, question))]
    counts = Counter(values)
    return {"room": code, "question": question, "answers": len(values), "revealed": shown,
            "counts": dict(counts.most_common()) if shown else None,
            "closes_in_s": max(0, int(created + ROOM_SECONDS - now))}
