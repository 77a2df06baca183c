"""playground/polls.py: rooms, answers counted once per session, tallies hidden until revealed, the limits,
and many students at once."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from playground import polls


@pytest.fixture
def db(tmp_path):
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


def test_another_room_cannot_be_read_and_an_old_room_is_gone(db):
    code, key = polls.open_room(db, now=1_000.0)
    other, _ = polls.open_room(db, now=1_000.0)
    polls.answer(code, "q", "s1", "4", db, now=1_001.0)
    assert polls.tally(other, "q", path=db, now=1_002.0)["answers"] == 0
    with pytest.raises(polls.PollError, match="no open room"):
        polls.answer(code, "q", "s2", "4", db, now=1_000.0 + polls.ROOM_SECONDS + 1)
    polls.open_room(db, now=1_000.0 + polls.ROOM_SECONDS + 2)             # opening purges the expired rooms
    import sqlite3
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 0


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
    with pytest.raises(polls.PollError, match="Give an answer"):
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
