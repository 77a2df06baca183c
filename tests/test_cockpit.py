"""The lecturer's cockpit on the page and through the API (ui/cockpit.py), and a student's walk recorded in a room
(ui/workshop_room.py): a student's page joins with a nickname and records steps, checked answers and hints; the
lecturer's live view shows them escaped, sends nothing when nothing changed, reveals a step (the student's page then
shows its answer), exports CSV and JSON files and deletes the room's data. The page's handlers run on both engines
(the class's database is the one `DATABASE_URL` or `POLLS_DB` names); the endpoints through gradio_client."""

from __future__ import annotations

import csv
import json
import os
from types import SimpleNamespace

import gradio as gr
import pytest

from playground import polls
from playground.analysis import workshops as w
from playground.rooms import progress
from playground.ui import cockpit, workshop_room

WORKSHOP = """id: mini
title: A two-step workshop
steps:
  - title: One
    view: ""
    text: Look.
    hints: ["First hint.", "Second hint."]
    question: {prompt: "How many?", kind: number, answer: 4, explain: "Four, counted."}
  - title: Two
    view: ""
    text: Look again.
    question: {prompt: "Which?", kind: choice, choices: [a, b], answer: b}
"""
SKIP = type(gr.skip())


@pytest.fixture
def where(rooms_db, monkeypatch) -> str:
    """The class's database for the page's handlers, as the app finds it: DATABASE_URL, else POLLS_DB."""
    if rooms_db.startswith("postgresql://"):
        monkeypatch.setenv("DATABASE_URL", rooms_db)
    else:
        monkeypatch.delenv("DATABASE_URL", raising=False)
        monkeypatch.setenv("POLLS_DB", rooms_db)
    return rooms_db


@pytest.fixture(scope="module")
def mini() -> w.Workshop:
    return w.load(WORKSHOP, "mini.yaml", lambda params: [], compute=True)


def page(session: str) -> SimpleNamespace:
    return SimpleNamespace(session_hash=session)


def walk_in(mini, code: str, session: str, name: str, step: int = 0) -> tuple[dict, dict]:
    """A student's page that joined `code` as `name` with the workshop open at `step`: (walk, member)."""
    walk = {"workshop": mini, "step": step, "hints": 0}
    status, member, shown, timer = workshop_room.join(code, name, walk, "", page(session))
    assert f"as **{name}**" in status and member["room"] == code and timer.active
    return walk, member


def test_a_students_page_records_steps_answers_and_hints(where, mini):
    code, key = polls.open_room()
    walk, member = walk_in(mini, code, "s1", "Ana")
    assert isinstance(workshop_room.answered(walk, member, {"workshop": "mini", "step": 1, "given": "5",
                                                            "correct": False}, page("s1")), SKIP)
    workshop_room.answered(walk, member, {"workshop": "mini", "step": 1, "given": "4", "correct": True}, page("s1"))
    workshop_room.answered(walk, member, {"workshop": "other", "step": 1, "given": "9", "correct": True}, page("s1"))
    workshop_room.hinted({**walk, "hints": 2}, member, page("s1"))
    walk = {**walk, "step": 1}
    workshop_room.reached(walk, member, "", page("s1"))
    data = progress.cockpit(code, key)
    assert data["students"][0] | {"seen_s_ago": 0} == {"nickname": "Ana", "workshop": "mini", "step": 2,
                                                        "answered": 1, "correct": 1, "hints": 2, "seen_s_ago": 0}
    first = data["workshops"][0]["steps"][0]
    assert (first["reached"], first["answered"], first["correct"], first["answers"]) == (1, 1, 1, {"4": 1})
    assert first["hints"] == [{"nickname": "Ana", "hints": 2}]


def test_a_page_not_in_a_room_records_nothing_and_bad_input_is_said(where, mini):
    code, key = polls.open_room()
    walk = {"workshop": mini, "step": 0, "hints": 0}
    assert all(isinstance(v, SKIP) for v in workshop_room.reached(walk, {}, "", page("s1")))
    for room, name, said in ((code, "x" * 10_000, "at most 24 characters"), (code, "<script>x</script>", "no HTML"),
                             ("<b>nope</b>", "Ana", "No room"), ("", "Ana", "No room")):
        status, *rest = workshop_room.join(room, name, walk, "", page("s1"))
        assert status.startswith("⚠") and said in status and "<b>" not in status and "<script>" not in status
        assert all(isinstance(v, SKIP) for v in rest)
    assert progress.cockpit(code, key)["joined"] == 0


def test_the_live_cockpit_shows_the_class_escaped_and_sends_nothing_unchanged(where, mini):
    code, key = polls.open_room()
    seat = {"room": code, "key": key}
    walk, member = walk_in(mini, code, "s1", "Ana")
    workshop_room.answered(walk, member, {"workshop": "mini", "step": 1, "given": "<img src=x onerror=alert(1)>",
                                          "correct": False}, page("s1"))
    summary, students, funnel, figure, steps, data, last, timer = cockpit.tick(seat, None)
    assert "**1** student joined" in summary and "| Ana | mini | 1 | 1 | 0 | 0 |" in students
    assert "&lt;img src=x onerror=alert(1)&gt;: 1" in funnel and "<img" not in funnel
    assert [t.name for t in figure.data] == ["reached", "answered", "answered right"]
    assert [list(t.y) for t in figure.data] == [[1], [1], [0]]
    assert steps["choices"] == [("mini: step 1", "1|mini")] and data["joined"] == 1 and isinstance(timer, SKIP)
    assert all(isinstance(v, SKIP) for v in cockpit.tick(seat, last))        # nothing changed: nothing sent
    walk_in(mini, code, "s2", "Ben")
    assert "**2** students joined" in cockpit.tick(seat, last)[0]
    refused = cockpit.tick({"room": code}, None)                              # a page without the key
    assert refused[0] == cockpit.NO_KEY and refused[-1].active is False
    assert cockpit.live(True, seat)[0].active and not cockpit.live(True, {"room": code})[0].active
    assert not cockpit.live(False, seat)[0].active


def test_a_revealed_step_shows_its_answer_on_the_students_page(where, mini):
    code, key = polls.open_room()
    walk, member = walk_in(mini, code, "s1", "Ana")
    assert all(isinstance(v, SKIP) for v in workshop_room.tick(walk, member, ""))   # not revealed yet
    assert "Pick a step" in cockpit.reveal({"room": code, "key": key}, None)
    refused = cockpit.reveal({"room": code, "key": "wrong"}, "1|mini")
    assert refused.startswith(f"⚠ Only the page that opened room {code} can reveal")
    assert cockpit.reveal({"room": code}, "1|mini") == cockpit.NO_KEY
    assert "Revealed step 1 of mini" in cockpit.reveal({"room": code, "key": key}, "1|mini")
    status, shown, member, timer = workshop_room.tick(walk, member, "")
    assert "revealed this step's answer: 4.**" in shown and "Four, counted." in shown
    assert all(isinstance(v, SKIP) for v in workshop_room.tick(walk, member, ""))   # shown once, not sent again
    said = workshop_room.answered(walk, member, {"workshop": "mini", "step": 1, "given": "3", "correct": False},
                                  page("s1"))
    assert "no longer counted" in said
    assert workshop_room.reached({**walk, "step": 1}, member, "", page("s1"))[1] == ""   # step 2: not revealed


def test_export_writes_the_three_files_and_delete_removes_the_room(where, mini):
    code, key = polls.open_room()
    seat = {"room": code, "key": key}
    walk, member = walk_in(mini, code, "s1", "Ana")
    workshop_room.answered(walk, member, {"workshop": "mini", "step": 1, "given": "4", "correct": True}, page("s1"))
    said, files = cockpit.export(seat)
    assert said == f"Exported room {code}: 1 students." and [f.rsplit("-", 1)[-1] for f in files] == [
        "students.csv", "questions.csv", "results.json"]
    with open(files[0], encoding="utf-8") as f:
        assert list(csv.DictReader(f))[0]["nickname"] == "Ana"
    with open(files[1], encoding="utf-8") as f:
        assert list(csv.DictReader(f))[0]["answers"] == "4: 1"
    with open(files[2], encoding="utf-8") as f:
        assert json.load(f)["answers"] == [{"nickname": "Ana", "workshop": "mini", "step": 1, "answer": "4",
                                            "correct": True}]
    from gradio import processing_utils, utils as gr_utils

    copies = [processing_utils.save_file_to_cache(f, gr_utils.get_upload_folder()) for f in files]  # as gr.File does
    assert cockpit.delete(seat, False)[0].startswith("Tick *Yes, delete* first")
    said, sure = cockpit.delete(seat, True)
    assert said.startswith(f"Deleted room {code}:") and sure is False
    assert not any(os.path.exists(f) for f in files)                    # the server's export files went too
    assert not any(os.path.exists(f) for f in copies)                   # and Gradio's copies of them
    assert cockpit.tick(seat, None)[0].startswith(f"⚠ No room {code}")
    assert workshop_room.tick(walk, member, "")[0].startswith(f"⚠ No room {code}")


def test_the_cockpit_endpoints_through_the_api(client):
    opened = client.predict(api_name="/poll_open")[-1]
    room, key = opened["room"], opened["key"]
    assert client.predict(room, key, api_name="/cockpit")["joined"] == 0
    progress.join(room, "api-student", "Ana")
    progress.answered(room, "api-student", "mini", 1, "4", True)
    data = client.predict(room, key, api_name="/cockpit")
    assert data["joined"] == 1 and data["workshops"][0]["steps"][0]["answers"] == {"4": 1}
    exported = client.predict(room, key, api_name="/cockpit_export")
    assert exported["students_csv"].splitlines() == ["nickname,workshop,step,answered,correct,hints",
                                                     "Ana,mini,1,1,1,0"]
    assert exported["results"]["answers"][0]["answer"] == "4"
    assert client.predict(room, key, "mini", 1, api_name="/cockpit_reveal")["revealed"] is True
    assert progress.revealed(room, "mini") == [1]
    deleted = client.predict(room, key, api_name="/cockpit_delete")
    assert deleted["deleted"] and deleted["rows"]["students"] == 1 and deleted["rows"]["rooms"] == 1
    with pytest.raises(Exception, match=f"No room {room}"):
        client.predict(room, key, api_name="/cockpit")
    with pytest.raises(Exception, match="Join a room first"):
        client.predict("", key, api_name="/cockpit")


@pytest.fixture(scope="module")
def shared():
    import app

    return app.demo.shared


def test_a_student_who_joins_opens_the_rooms_workshop(where, shared):
    from playground.ui import workshop_tab

    code, key = polls.open_room()
    assert cockpit.cockpit_workshop(code, key, WORKSHOP) == {"room": code, "workshop": "mini",
                                                              "title": "A two-step workshop", "n_steps": 2}
    out = workshop_tab.room_workshop({"room": code, "nickname": "Ana"}, 0)
    walk, step_md = out[len(shared.view) + 3:len(shared.view) + 5]
    assert walk["workshop"].id == "mini" and walk["step"] == 0 and "Step 1 of 2" in step_md
    said = cockpit.give({"room": code, "key": key}, "tokenization")           # the lecturer's page: a shipped one
    assert "walks **Tokenization" in said and progress.workshop_of(code).startswith("# A workshop for the Token")
    assert "no workshop now" in cockpit.give({"room": code, "key": key}, None)
    assert all(isinstance(v, SKIP) for v in workshop_tab.room_workshop({"room": code}, 0))   # none: nothing moves
    with pytest.raises(gr.Error, match="does not load"):
        cockpit.cockpit_workshop(code, key, "id: broken\nsteps: 3\n")
    assert cockpit.give({"room": code}, "tokenization") == cockpit.NO_KEY


def test_the_lecturers_own_workshop_file_is_given_to_the_room_or_told_why_not(where, shared, tmp_path):
    """The cockpit's upload: a lecturer's own file (not a shipped workshop) becomes the room's, so a student who joins
    opens it; a file that does not load is said with its line and field, and the room keeps what it had; a file
    that is not text, and a page without the room's key, are told plainly."""
    from playground.ui import workshop_tab

    code, key = polls.open_room()
    mine = tmp_path / "my-lecture.yaml"
    mine.write_text(WORKSHOP, encoding="utf-8")
    said = cockpit.give_file({"room": code, "key": key}, str(mine))
    assert "walks your **A two-step workshop** (2 steps, from my-lecture.yaml)" in said
    assert progress.workshop_of(code) == WORKSHOP
    walk = workshop_tab.room_workshop({"room": code, "nickname": "Ana"}, 0)[len(shared.view) + 3]
    assert walk["workshop"].id == "mini" and walk["step"] == 0

    broken = tmp_path / "broken.yaml"
    broken.write_text(WORKSHOP.replace("kind: choice", "kind: essay"), encoding="utf-8")
    said = cockpit.give_file({"room": code, "key": key}, str(broken))
    assert said.startswith("⚠ This workshop does not load") and "line 12, steps[1].question.kind" in said
    assert progress.workshop_of(code) == WORKSHOP                       # unchanged
    binary = tmp_path / "slides.json"
    binary.write_bytes(b"\xff\xfe\x00binary")
    assert "could not be read as UTF-8 text" in cockpit.give_file({"room": code, "key": key}, str(binary))
    assert cockpit.give_file({"room": code}, str(mine)) == cockpit.NO_KEY
    assert isinstance(cockpit.give_file({"room": code, "key": key}, None), SKIP)   # the file was removed


COPY_B = """
import json, sys
from playground.analysis import workshops as w
from playground.rooms import progress
code = sys.argv[1]
text = progress.workshop_of(code)                 # this copy never saw the lecturer: only the database did
progress.join(code, "copy-b", "Bea")
progress.reach(code, "copy-b", "mini", 2)
print(json.dumps(w.as_json(w.load(text, "room.yaml", lambda params: [], compute=True))))
"""


def test_a_student_on_another_copy_walks_the_same_workshop(postgres, monkeypatch, mini):
    """Two copies of the app on one PostgreSQL: the lecturer's (this process) gives the room its workshop; a student
    on the other (a process of its own, sharing nothing but DATABASE_URL) reads it and walks it; the lecturer's
    cockpit sees that student."""
    import subprocess
    import sys
    from pathlib import Path

    url = postgres.fresh_url()
    monkeypatch.setenv("DATABASE_URL", url)
    code, key = polls.open_room()
    cockpit.cockpit_workshop(code, key, WORKSHOP)
    done = subprocess.run([sys.executable, "-c", COPY_B, code], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[1], env={**os.environ, "DATABASE_URL": url})
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == w.as_json(mini)
    data = cockpit.cockpit(code, key)
    assert [(s["nickname"], s["workshop"], s["step"]) for s in data["students"]] == [("Bea", "mini", 2)]
