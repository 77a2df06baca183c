"""playground/rooms/progress.py: a room's workshop progress, as the lecturer's cockpit reads it. Students join with a
nickname (checked: length, HTML), their steps, answers (the last wins, counted once) and hints are recorded, the
cockpit's funnel and distributions are counted from them, a revealed step takes no more answers, the lecturer's
functions refuse without the key, the exports, and deleting a room's data removes every row it holds and no other.
Every test runs on both engines: a SQLite file, and a fresh schema of the session's PostgreSQL."""

import csv
import io
from concurrent.futures import ThreadPoolExecutor

import pytest

from playground import polls
from playground.rooms import progress
from playground.rooms.database import RoomError, database
from playground.rooms.migrations import ROOM_TABLES


@pytest.fixture
def db(rooms_db) -> str:
    return rooms_db


def _class(db, now=None):
    """A room with three students on the 'bpe' workshop: ana on step 3, ben and cy on step 2."""
    code, key = polls.open_room(db, now=now)
    for session, name in (("s-ana", "Ana"), ("s-ben", "Ben"), ("s-cy", "Cy")):
        progress.join(code, session, name, db, now=now)
        progress.reach(code, session, "bpe", 1, db, now=now)
        progress.reach(code, session, "bpe", 2, db, now=now)
    progress.answered(code, "s-ana", "bpe", 2, "4", True, db, now=now)
    progress.answered(code, "s-ben", "bpe", 2, "5", False, db, now=now)
    progress.answered(code, "s-ben", "bpe", 2, "4", True, db, now=now)      # again: the last answer wins
    progress.answered(code, "s-cy", "bpe", 2, "3", False, db, now=now)
    progress.hinted(code, "s-cy", "bpe", 2, 1, db, now=now)
    progress.hinted(code, "s-cy", "bpe", 2, 2, db, now=now)
    progress.hinted(code, "s-cy", "bpe", 2, 1, db, now=now)                # the count never goes back
    progress.reach(code, "s-ana", "bpe", 3, db, now=now)
    return code, key


def test_the_cockpit_counts_who_is_where_the_funnel_answers_and_hints(db):
    code, key = _class(db)
    data = progress.cockpit(code, key, db)
    assert data["room"] == code and data["joined"] == 3
    where = {s["nickname"]: (s["workshop"], s["step"], s["answered"], s["correct"], s["hints"])
             for s in data["students"]}
    assert where == {"Ana": ("bpe", 3, 1, 1, 0), "Ben": ("bpe", 2, 1, 1, 0), "Cy": ("bpe", 2, 1, 0, 2)}
    (workshop,) = data["workshops"]
    assert workshop["workshop"] == "bpe"
    funnel = [(s["step"], s["reached"], s["answered"], s["correct"]) for s in workshop["steps"]]
    assert funnel == [(1, 3, 0, 0), (2, 3, 3, 2), (3, 1, 0, 0)]
    assert workshop["steps"][1]["answers"] == {"4": 2, "3": 1}             # Ben's first answer is gone
    assert workshop["steps"][1]["hints"] == [{"nickname": "Cy", "hints": 2}]
    assert not any(s["revealed"] for s in workshop["steps"])


def test_nicknames_are_plain_short_text(db):
    code, key = polls.open_room(db)
    for bad, said in (("x" * 10_000, "at most 24 characters \\(yours has 10,000\\)"),
                      ("<b>Ann</b>", "plain text: no HTML"), ("Ann\x00", "no control characters"),
                      ("   ", "Type a nickname first"), (None, "A nickname is text")):
        with pytest.raises(RoomError, match=said):
            progress.join(code, "s1", bad, db)
    assert progress.join(code, "s1", "  Ann   Lee ", db) == {"room": code, "nickname": "Ann Lee"}
    progress.join(code, "s1", "Annie", db)                                 # joining again renames
    assert [s["nickname"] for s in progress.cockpit(code, key, db)["students"]] == ["Annie"]


def test_progress_needs_a_joined_student_an_open_room_and_a_real_step(db):
    code, _ = polls.open_room(db, now=1_000.0)
    with pytest.raises(RoomError, match=f"Join room {code} with a nickname first"):
        progress.reach(code, "s1", "bpe", 1, db, now=1_000.0)
    progress.join(code, "s1", "Ann", db, now=1_000.0)
    for workshop, step, said in (("bpe", 0, "from 1 to 100, not 0"), ("bpe", "two", "a number"),
                                 ("", 1, "named by its id"), ("w" * 81, 1, "named by its id")):
        with pytest.raises(RoomError, match=said):
            progress.reach(code, "s1", workshop, step, db, now=1_000.0)
    with pytest.raises(RoomError, match="has closed"):
        progress.reach(code, "s1", "bpe", 1, db, now=1_000.0 + polls.ROOM_SECONDS + 1)
    with pytest.raises(RoomError, match="^No room ABCDEF"):
        progress.join("ABCDEF" if code != "ABCDEF" else "GHJKMN", "s1", "Ann", db)


def test_the_lecturers_functions_refuse_without_the_key(db):
    code, key = _class(db)
    _, other_key = polls.open_room(db)
    calls = {"see its cockpit": lambda k: progress.cockpit(code, k, db),
             "export its results": lambda k: progress.export(code, k, db),
             "reveal a step's answer": lambda k: progress.reveal(code, k, "bpe", 2, db),
             "delete its data": lambda k: progress.delete(code, k, db)}
    for what, call in calls.items():
        for wrong in ("", None, "not-the-key", "clé", other_key):
            with pytest.raises(RoomError, match=f"Only the page that opened room {code} can {what}"):
                call(wrong)
    assert progress.cockpit(code, key, db)["joined"] == 3                  # nothing was revealed or deleted
    assert progress.revealed(code, "bpe", db) == []


def test_a_revealed_step_is_shown_to_the_room_and_takes_no_more_answers(db):
    code, key = _class(db)
    assert progress.reveal(code, key, "bpe", 2, db)["revealed"] is True
    assert progress.revealed(code, "bpe", db) == [2] and progress.revealed(code, "other", db) == []
    with pytest.raises(RoomError, match="revealed this step's answer"):
        progress.answered(code, "s-cy", "bpe", 2, "4", True, db)
    step = progress.cockpit(code, key, db)["workshops"][0]["steps"][1]
    assert step["revealed"] and step["answers"] == {"4": 2, "3": 1}        # the distribution the class answered
    progress.answered(code, "s-cy", "bpe", 3, "7", True, db)               # other steps still take answers


def test_exports_give_a_row_per_student_and_per_question(db):
    code, key = _class(db)
    progress.join(code, "s-eve", "=HYPERLINK(1)", db)                       # a formula is kept as text
    data = progress.export(code, key, db)
    students = list(csv.DictReader(io.StringIO(progress.students_csv(data))))
    assert [s["nickname"] for s in students] == ["Ana", "Ben", "Cy", "'=HYPERLINK(1)"]
    assert students[2] == {"nickname": "Cy", "workshop": "bpe", "step": "2", "answered": "1", "correct": "0",
                           "hints": "2"}
    questions = list(csv.DictReader(io.StringIO(progress.questions_csv(data))))
    assert [(q["step"], q["reached"], q["answered"], q["correct"]) for q in questions] == [
        ("1", "3", "0", "0"), ("2", "3", "3", "2"), ("3", "1", "0", "0")]
    assert questions[1]["answers"] == "4: 2; 3: 1" and questions[1]["hints"] == "Cy"
    assert questions[0]["answers"] == questions[0]["hints"] == ""           # an empty cell, not a lone "'"
    assert "'" not in progress.questions_csv(data).replace("'=HYPERLINK", "")
    cells = list(csv.reader(io.StringIO(progress._csv(["a", "b"], [{"a": "\tcmd", "b": "-1"}]))))[1]
    assert cells == ["'\tcmd", "'-1"]                                     # OWASP's other formula starts too
    assert data["answers"] == [
        {"nickname": "Ana", "workshop": "bpe", "step": 2, "answer": "4", "correct": True},
        {"nickname": "Ben", "workshop": "bpe", "step": 2, "answer": "4", "correct": True},
        {"nickname": "Cy", "workshop": "bpe", "step": 2, "answer": "3", "correct": False}]


def _rows_of(db, code) -> dict:
    with database(db).read() as tx:
        return {t: tx.one(f"SELECT COUNT(*) FROM {t} WHERE code = ?", (code,))[0] for t in ROOM_TABLES}


def test_deleting_a_rooms_data_removes_every_row_it_holds_and_no_other(db):
    code, key = _class(db)
    polls.set_question(code, key, "blank", db)
    polls.answer(code, "blank", "s-ana", "3", db)
    polls.tally(code, "blank", key, reveal=True, path=db)
    progress.reveal(code, key, "bpe", 2, db)
    other, other_key = _class(db)
    before = _rows_of(db, code)
    assert all(before[t] > 0 for t in ROOM_TABLES), before                 # every table had rows of this room
    done = progress.delete(code, key, db)
    assert done["deleted"] and done["rows"] == before
    assert _rows_of(db, code) == {t: 0 for t in ROOM_TABLES}
    with pytest.raises(RoomError, match=f"No room {code}"):
        progress.cockpit(code, key, db)
    assert progress.cockpit(other, other_key, db)["joined"] == 3           # the other room is untouched


def test_an_expired_rooms_progress_goes_with_it(db):
    code, _ = _class(db, now=1_000.0)
    polls.open_room(db, now=1_000.0 + polls.ROOM_SECONDS + 1)              # opening a room purges the old ones
    assert _rows_of(db, code) == {t: 0 for t in ROOM_TABLES}


def test_many_students_answering_at_once_are_each_counted_once(db):
    code, key = polls.open_room(db)
    sessions = [f"s{i}" for i in range(60)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda s: progress.join(code, s, s.upper(), db), sessions))
        list(pool.map(lambda s: progress.answered(code, s, "bpe", 1, "4", int(s[1:]) % 3 == 0, db),
                      sessions + sessions[:20]))                         # 20 answer twice
    step = progress.cockpit(code, key, db)["workshops"][0]["steps"][0]
    assert (step["reached"], step["answered"], step["correct"], step["answers"]) == (60, 60, 20, {"4": 60})


def test_a_rooms_workshop_is_kept_with_the_room(db):
    code, key = polls.open_room(db)
    assert progress.workshop_of(code, db) == ""
    for wrong in ("", "nope"):
        with pytest.raises(RoomError, match=f"Only the page that opened room {code} can give it a workshop"):
            progress.set_workshop(code, wrong, "id: x", db)
    with pytest.raises(RoomError, match="at most 200,000 characters"):
        progress.set_workshop(code, key, "x" * 200_001, db)
    progress.set_workshop(code, key, "id: mini\n", db)
    assert progress.workshop_of(code, db) == "id: mini\n"
    progress.set_workshop(code, key, "", db)                               # none again
    assert progress.workshop_of(code, db) == ""
