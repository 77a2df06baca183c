"""playground/polls.py: rooms, answers counted once per session, tallies hidden until revealed, the room's current
question, no answers after a reveal, the limits, an old file migrated in place, and many students at once. Every
test but the old file's runs on both engines: a SQLite file, and a fresh schema of the session's PostgreSQL."""

import sqlite3
from concurrent.futures import ThreadPoolExecutor

import pytest

from playground import polls
from playground.rooms import migrations
from playground.rooms.database import database


@pytest.fixture
def db(rooms_db) -> str:
    return rooms_db


@pytest.fixture
def sqlite_file(tmp_path):
    return tmp_path / "polls.sqlite3"


def test_a_room_has_an_unguessable_code_and_a_key(db):
    rooms = {polls.open_room(db) for _ in range(20)}
    codes = {code for code, _ in rooms}
    assert len(codes) == 20
    for code, key in rooms:
        assert len(code) == polls.CODE_LENGTH and set(code) <= set(polls.CODE_ALPHABET) and len(key) >= 20
    assert polls.normalise_code(" " + code[:3].lower() + " " + code[3:] + " ") == code   # as typed from a screen
    with pytest.raises(polls.PollError, match="letters and digits"):
        polls.normalise_code("ABC")


def test_a_wrong_or_closed_room_says_what_to_do(db):
    for typed in ("ABC123", "abc123"):   # 1 is never in a code: a misread screen
        with pytest.raises(polls.PollError, match="^No room ABC123: check the code your lecturer shows"):
            polls.answer(typed, "q", "s1", "4", db)
    code, _ = polls.open_room(db, now=1_000.0)
    unknown = next(c for c in ("ABCDEF", "GHJKMN") if c != code)
    with pytest.raises(polls.PollError, match=f"^No room {unknown}: check the code"):
        polls.tally(unknown, "q", path=db, now=1_001.0)
    with pytest.raises(polls.PollError, match=f"^Room {code} has closed: rooms close 3 hours after they open"):
        polls.status(code, db, now=1_000.0 + polls.ROOM_SECONDS + 1)


def test_one_answer_per_session_and_question_replaced_not_added(db):
    code, key = polls.open_room(db)
    assert polls.answer(code, "q", "s1", "4", db) == 1
    assert polls.answer(code, "q", "s1", "5", db) == 1                 # a new answer replaces the old one
    assert polls.answer(code, "q", "s2", "5", db) == 2
    assert polls.answer(code, "other", "s1", "x", db) == 1             # another question counts on its own
    assert polls.tally(code, "q", key, path=db)["counts"] == {"5": 2}


def test_the_tally_is_hidden_until_the_lecturer_reveals_it(db):
    code, key = polls.open_room(db)
    polls.answer(code, "q", "s1", "4", db)
    student = polls.tally(code, "q", path=db)
    assert student["answers"] == 1 and student["counts"] is None and not student["revealed"]
    with pytest.raises(polls.PollError, match="Only the page that opened"):
        polls.tally(code, "q", "not-the-key", reveal=True, path=db)
    assert polls.tally(code, "q", key, reveal=True, path=db)["counts"] == {"4": 1}
    assert polls.tally(code, "q", path=db)["counts"] == {"4": 1}     # now every student sees it
    assert polls.tally(code, "other", path=db)["counts"] is None       # only that question


def test_a_room_carries_its_lecturers_question(db):
    code, key = polls.open_room(db, question="tokens-bpe")
    assert polls.status(code, db)["question"] == "tokens-bpe"      # a student who joins sees it
    polls.answer(code, "tokens-bpe", "s1", "4", db)
    with pytest.raises(polls.PollError, match="Only the page that opened"):
        polls.set_question(code, "not-the-key", "blank", db)
    assert polls.status(code, db) | {"closes_in_s": 0} == {"room": code, "question": "tokens-bpe", "answers": 1,
                                                         "final": False, "closes_in_s": 0}
    moved = polls.set_question(code, key, "blank", db)
    assert moved["question"] == "blank" and moved["answers"] == 0 == polls.status(code, db)["answers"]
    with pytest.raises(polls.PollError, match="by its id"):
        polls.set_question(code, key, "x" * 100, db)
    assert polls.status(code, db)["question"] == "blank"


def test_a_revealed_question_takes_no_more_answers(db):
    code, key = polls.open_room(db, question="q")
    polls.answer(code, "q", "s1", "4", db)
    polls.answer(code, "q", "s2", "3", db)
    seen = polls.tally(code, "q", key, reveal=True, path=db)
    assert seen["final"] and seen["counts"] == {"4": 1, "3": 1} and polls.status(code, db)["final"]
    for session, value in (("s3", "4"), ("s1", "3")):                # a new answer, or a changed one
        with pytest.raises(polls.PollError, match="revealed the answers to this question"):
            polls.answer(code, "q", session, value, db)
    assert polls.tally(code, "q", path=db)["counts"] == seen["counts"]   # the histogram the class saw
    assert polls.answer(code, "next", "s3", "4", db) == 1             # the next question is open
    assert not polls.tally(code, "next", key, path=db)["final"]


OLD_SCHEMA = """
CREATE TABLE rooms (code TEXT PRIMARY KEY, key TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE revealed (code TEXT NOT NULL, question TEXT NOT NULL, PRIMARY KEY (code, question));
CREATE TABLE answers (code TEXT NOT NULL, question TEXT NOT NULL, session TEXT NOT NULL,
                      answer TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (code, question, session));
"""


def test_a_file_from_before_rooms_had_a_question_is_migrated_in_place(sqlite_file):
    import time

    db = sqlite_file
    with sqlite3.connect(db) as con:                                    # as the first version of polls.py wrote it
        con.executescript(OLD_SCHEMA)
        con.execute("INSERT INTO rooms VALUES ('ABCDEF', 'k' , ?)", (time.time(),))
        con.execute("INSERT INTO answers VALUES ('ABCDEF', 'q', 's1', '4', ?)", (time.time(),))
    assert polls.status("ABCDEF", db)["question"] == ""                # kept, no question yet
    assert polls.set_question("ABCDEF", "k", "q", db)["answers"] == 1
    assert polls.tally("ABCDEF", "q", "k", path=db)["counts"] == {"4": 1}
    code, _ = polls.open_room(db, question="blank")
    assert polls.status(code, db)["question"] == "blank"
    with sqlite3.connect(db) as con:
        assert "question" in {row[1] for row in con.execute("PRAGMA table_info(rooms)")}
        assert [v for (v,) in con.execute("SELECT version FROM schema_migrations ORDER BY version")] == [
            v for v, _, _ in migrations.MIGRATIONS]                    # every later migration applied after them


def test_a_file_with_questions_but_no_migration_table_is_adopted(sqlite_file):
    """The second format (polls.py with its ALTER TABLE, before rooms/migrations.py): 1 and 2 recorded, 3 applied."""
    import time

    with sqlite3.connect(sqlite_file) as con:
        con.executescript(OLD_SCHEMA)
        con.execute("ALTER TABLE rooms ADD COLUMN question TEXT NOT NULL DEFAULT ''")
        con.execute("INSERT INTO rooms VALUES ('ABCDEF', 'k', ?, 'q')", (time.time(),))
        con.execute("INSERT INTO answers VALUES ('ABCDEF', 'q', 's1', '4', ?)", (time.time(),))
    assert polls.status("ABCDEF", sqlite_file) | {"closes_in_s": 0} == {
        "room": "ABCDEF", "question": "q", "answers": 1, "final": False, "closes_in_s": 0}
    with sqlite3.connect(sqlite_file) as con:
        assert con.execute("SELECT version, name FROM schema_migrations WHERE version = 3").fetchone()[1].startswith(
            "follow me")
        assert con.execute("SELECT view, view_version FROM rooms").fetchone() == ("", 0)


def test_another_room_cannot_be_read_and_an_old_room_is_gone(db):
    code, key = polls.open_room(db, now=1_000.0)
    other, _ = polls.open_room(db, now=1_000.0)
    polls.answer(code, "q", "s1", "4", db, now=1_001.0)
    assert polls.tally(other, "q", path=db, now=1_002.0)["answers"] == 0
    with pytest.raises(polls.PollError, match="has closed"):
        polls.answer(code, "q", "s2", "4", db, now=1_000.0 + polls.ROOM_SECONDS + 1)
    polls.open_room(db, now=1_000.0 + polls.ROOM_SECONDS + 2)             # opening purges the expired rooms
    with pytest.raises(polls.PollError, match="No room"):
        polls.status(code, db, now=1_000.0 + polls.ROOM_SECONDS + 3)
    with database(db).read() as tx:
        assert tx.one("SELECT COUNT(*) FROM answers")[0] == 0


def test_limits_on_rooms_answers_and_length(db, monkeypatch):
    monkeypatch.setattr(polls, "MAX_ROOMS", 2)
    monkeypatch.setattr(polls, "MAX_ANSWERS", 2)
    code, key = polls.open_room(db)
    polls.open_room(db)
    with pytest.raises(polls.PollError, match="rooms are open"):
        polls.open_room(db)
    polls.answer(code, "q", "s1", "a" * 100, db)
    polls.answer(code, "q", "s2", "b", db)
    with pytest.raises(polls.PollError, match="already has 2 answers"):
        polls.answer(code, "q", "s3", "c", db)
    polls.answer(code, "q", "s1", "d", db)                              # s1 may still change its answer
    assert polls.tally(code, "q", key, path=db)["counts"] == {"b": 1, "d": 1}
    with pytest.raises(polls.PollError, match="answer is empty"):
        polls.answer(code, "q", "s4", "   ", db)
    counts = polls.tally(code, "q", key, path=db)["counts"]
    assert all(len(k) <= polls.MAX_ANSWER_CHARS for k in counts)


def test_two_hundred_students_at_once_are_each_counted_once(db):
    code, key = polls.open_room(db)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: polls.answer(code, "q", f"s{i}", str(i % 5), db), range(200)))
        list(pool.map(lambda i: polls.answer(code, "q", f"s{i}", str(i % 5), db), range(0, 200, 7)))  # again
    tally = polls.tally(code, "q", key, path=db)
    assert tally["answers"] == 200 and tally["counts"] == {str(v): 40 for v in range(5)}
