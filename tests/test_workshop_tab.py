"""Workshops on the page and through the API (ui/workshop_tab.py): every shipped workshop loads against the app's own
views and computes every tool answer; a walk applies each step's view as a link does; Check never blocks; bad input
(a malformed file, an answer of 10,000 characters, HTML in a file, an unknown workshop) gets a clear message."""

from __future__ import annotations

import re

import gradio as gr
import pytest

from playground.analysis import workshop_tools as tools
from playground.analysis import workshops as w
from playground.ui import view
from playground.ui import workshop_tab as wt


@pytest.fixture(scope="module")
def shared():
    import app

    return app.demo.shared


def outputs(result: list, shared) -> tuple[dict, list]:
    """A walk's outputs: the view's values that are set (key -> value), and the rest after them."""
    n = len(shared.view)
    skip = type(gr.skip())
    return {k: v for k, v in zip(shared.view, result[:n]) if not isinstance(v, skip)}, result[n:]


@pytest.mark.parametrize("path", w.shipped_files(), ids=lambda p: p.stem)
def test_every_shipped_workshop_loads_against_the_apps_views_and_computes_every_answer(path, shared):
    workshop = w.load(path.read_text(encoding="utf-8"), path.name, lambda p: view.problems(shared, p), compute=True)
    for i, step in enumerate(workshop.steps):
        params = w.parse_view(step.view)
        assert params and not view.parse(shared, params).notices, (path.stem, i)
        q = step.question
        if q is not None and q.tool:
            answer, why = tools.compute(q.tool, tools.with_input(q.args, q.example))
            assert answer and why
            if q.kind == "choice":
                assert answer in q.choices, f"{path.stem} step {i + 1}: {answer!r} is not a choice"
            if q.kind == "number":
                assert answer in q.words or w._number(answer) is not None


def test_a_walk_applies_each_steps_view_as_a_link_does(shared):
    set_, rest = outputs(wt.pick_workshop("attention", 0), shared)
    assert set_ == {"text": "The bank by the river was closed on Sunday.", "att.model": "minilm", "att.layer": 2,
                    "att.head": "mean"}
    selected, restored, tab, walk, step_md = rest[:5]
    assert selected.selected == "attention" and restored["value"] == 1 and tab == "attention"
    assert walk["step"] == 0 and "Step 1 of 5" in step_md and "previous token" in step_md
    assert rest[5]["visible"] and rest[5]["choices"] == [str(h) for h in range(12)]   # a choice question: the radio
    set_, rest = outputs(wt.go(walk, +1, 1), shared)
    assert set_ == {"att.model": "minilm"} and rest[2] == "attention/head-finder" and rest[1]["value"] == 2
    walk = rest[3]
    assert rest[7]["visible"] and rest[7]["label"] == "Your sentence"     # the tool reads the student's input
    set_, rest = outputs(wt.go(walk, -1, 2), shared)
    assert set_["att.layer"] == 2 and rest[3]["step"] == 0
    assert all(isinstance(x, type(gr.skip())) for x in wt.go(rest[3], -1, 3))   # the first step: nothing moves


def test_check_grades_live_and_never_blocks(shared):
    walk = outputs(wt.pick_workshop("attention", 0), shared)[1][3]
    walk = outputs(wt.go(walk, +1, 1), shared)[1][3]                     # the student's own sentence
    truth = tools.compute("top_head", {"model": "minilm", "text": "Dogs chase cats.", "layer": 0,
                                       "statistic": "previous"})[0]
    md, data = wt.check_answer(walk, None, truth, "Dogs chase cats.")
    assert md.startswith("**✓ Right.**") and data["correct"] and data["answer"] == truth and data["computed"]
    md, data = wt.check_answer(walk, None, str((int(truth) + 1) % 12), "Dogs chase cats.")
    assert md.startswith("**✗ Not quite.**") and not data["correct"]
    md, _ = wt.check_answer(walk, None, "x" * 10_000, "Dogs chase cats.")
    assert md == "⚠ Your answer is 10,000 characters long; an answer is at most 500."
    md, _ = wt.check_answer(walk, None, "3", "")
    assert md.startswith("⚠ Type Your sentence first")
    assert outputs(wt.go(walk, +1, 2), shared)[1][3]["step"] == 2         # a wrong answer does not stop Next


def test_the_quiz_walked_as_a_workshop_keeps_a_rooms_answer_until_the_reveal(shared):
    """The Workshops panel offers the class quiz's own file: in a quiz room its Check keeps the quiz's rule."""
    from playground import polls
    from playground.analysis import exercises as ex
    from playground.ui import quiz_tab

    walk = outputs(wt.pick_workshop("quiz", 0), shared)[1][3]
    question = w.load_shipped("quiz", models_required=False).steps[walk["step"]].question
    code, key = polls.open_room(question=question.id)
    seat = {"room": code, "key": "", "question": question.id}
    truth = ex.solution(question.id)[0]
    verdict, data = wt.check_answer(walk, None, truth, "", seat)
    assert "stays hidden until the lecturer reveals it" in verdict and "answer" not in data and data["hidden"]
    quiz_tab.poll_tally(code, question.id, key, True)
    assert wt.check_answer(walk, None, truth, "", seat)[1]["correct"]
    assert wt.check_answer(walk, None, truth, "", {})[1]["correct"]          # outside a room: at once


def test_hints_come_one_at_a_time(shared):
    walk = outputs(wt.pick_workshop("tokenization", 0), shared)[1][3]
    md, walk = wt.next_hint(walk)
    assert "Only the tokens of the byte-level BPE row" in md and "(1 more)" in md and walk["hints"] == 1
    md, walk = wt.next_hint(walk)
    assert "Ġ" in md and "more)" not in md


def test_a_title_or_answer_that_ends_a_sentence_gets_no_second_full_stop(shared, tmp_path):
    """Double punctuation: a step titled "Which bank?" was shown as "Which bank?."."""
    from playground.ui import workshop_room

    mine = tmp_path / "mine.yaml"
    mine.write_text("title: Mine\nsteps:\n  - title: Which bank?\n    view: tab=embeddings\n    text: Look.\n"
                    "    question: {prompt: \"Which one?\", kind: text, accept: [\"river bank!\"]}\n"
                    "  - title: Plain\n    view: tab=embeddings\n    text: Look.\n", encoding="utf-8")
    step_md = outputs(wt.import_file(str(mine), 0), shared)[1][4]
    assert "**Step 1 of 2: Which bank?**" in step_md and "?." not in step_md
    workshop = w.load(mine.read_text(encoding="utf-8"), "mine.yaml", lambda p: view.problems(shared, p))
    assert "Step 2 of 2: Plain.**" in wt._step_md(workshop, 1)
    revealed = workshop_room.revealed_md(workshop, 0, "")
    assert "answer: river bank!**" in revealed and "!." not in revealed
    verdict, _ = wt.check_answer({"workshop": workshop, "step": 0}, None, "the sea", "")
    assert "the answer is **river bank!**" in verdict and "!**." not in verdict   # the Check's verdict too


def test_an_imported_file_is_validated_and_its_html_escaped(shared, tmp_path):
    good = tmp_path / "mine.yaml"
    good.write_text("title: <b>Mine</b>\nsteps:\n  - view: tab=embeddings\n    text: <script>alert(1)</script> "
                    "look\n    question: {prompt: <img src=x onerror=alert(1)>, kind: text, accept: [yes]}\n",
                    encoding="utf-8")
    set_, rest = outputs(wt.import_file(str(good), 0), shared)
    step_md = rest[4]
    assert "<script>" not in step_md and "&lt;script&gt;" in step_md and "<img" not in step_md
    assert "&lt;b&gt;Mine&lt;/b&gt;" in step_md and rest[0].selected == "embeddings"
    bad = tmp_path / "bad.yaml"
    bad.write_text("title: x\nsteps:\n  - view: tab=attention&att.layer=99\n    text: <i>hi</i>\n", encoding="utf-8")
    with pytest.raises(gr.Error, match=r"line 3, steps\[0\]\.view: The link's att.layer=99 is out of range"):
        wt.import_file(str(bad), 0)
    binary = tmp_path / "x.json"
    binary.write_bytes(b"\xff\xfe\x00 not text")
    with pytest.raises(gr.Error, match="could not be read as UTF-8"):
        wt.import_file(str(binary), 0)


def test_the_endpoints_answer_and_refuse_clearly(shared):
    listed = wt.workshop_list()["workshops"]
    assert {x["id"] for x in listed} == {p.stem for p in w.shipped_files()} and all(x["n_steps"] for x in listed)
    loaded = wt.workshop_load((w.SHIPPED / "bert.yaml").read_text(encoding="utf-8"))
    assert loaded["ok"] and loaded["workshop"]["id"] == "bert" and "answer" not in loaded["workshop"]["steps"][2]["question"]
    refused = wt.workshop_load('{\n  "title": "x",\n  "steps": [{"text": "a", "question": {"kind": "guess"}}]\n}')
    assert not refused["ok"] and refused["messages"][0].startswith("line 3, steps[0].question")
    asked = wt.workshop_check("bert", 3, "")                               # no answer yet: the question only
    assert not asked["answered"] and asked["question"]["kind"] == "number" and "correct" not in asked
    verdict = wt.workshop_check("bert", 3, " 15 ")
    assert verdict["correct"] and verdict["step"] == 3 and not verdict["computed"]
    for args, message in [(("nope", 1, "1"), "Unknown workshop 'nope'"), (("bert", 9, "1"), "has steps 1 to 3"),
                          (("", 1, "1"), "Name a workshop"), (("bert", 3, "x" * 10_000), "10,000 characters long"),
                          (("bert", "two", "1"), "should be a number")]:
        with pytest.raises(gr.Error, match=message):
            wt.workshop_check(*args)


def test_the_api_is_served(client):
    from gradio_client.exceptions import AppError

    assert client.predict(api_name="/workshop_list")["workshops"]
    verdict = client.predict("tokenization", 1, "2", "Ada", api_name="/workshop_check")
    assert verdict["answer"] == tools.compute("tokens", {"tokenizer": "bpe", "text": "Ada"})[0]
    assert client.predict("title: x\nsteps: []\n", api_name="/workshop_load")["messages"] == [
        "line 2, steps: `steps` should be a list of at least one step"]
    with pytest.raises(AppError, match="Unknown workshop"):
        client.predict("<b>nope</b>", 1, "1", "", api_name="/workshop_check")


def test_an_event_that_skips_all_outputs_but_one_sends_that_one_as_it_is(shared):
    """ui/patches.py passes a bare skip through unbuilt; with one output left, Gradio wraps a single value in a list,
    so the one value left must go in bare (a Check refused: the verdict's text, the JSON skipped)."""
    import asyncio

    import app

    app.configure_process()     # the patch is the served process's (ui/process.configure), not the page's build
    fn = next(fn for fn in app.demo.fns.values() if fn.name == "check_answer")
    out = asyncio.run(app.demo.postprocess_data(fn, ["⚠ Your answer is empty", gr.skip()], None))
    assert out[0] == "⚠ Your answer is empty" and out[1] == {"__type__": "update"}


def test_a_lecturer_writes_a_workshop_step_by_step_and_downloads_it(shared):
    from playground.analysis import workshop_drafts as drafts
    from playground.ui import workshop_form as form

    draft, said = form.add_step(drafts.START, "Heads", "", "Pick head 3.", "look at the diagonal", "choice",
                                "Which head?", "2, 3, 4", "3", 0, "", "", "", "", "?tab=attention&att.layer=2")
    assert said.startswith("Step 1 added") and "att.layer=2" in said
    draft, said = form.add_step(draft, "Heads", "", "Your name.", "", "number", "How many BPE tokens?", "", "", 0,
                                "tokens", '{tokenizer: bpe, text: "{input}"}', "Your name", "Ada", "?tab=tokenization")
    workshop = w.load(draft, "d.yaml", lambda p: view.problems(shared, p))
    assert workshop.title == "Heads" and [s.view for s in workshop.steps] == ["tab=attention&att.layer=2",
                                                                               "tab=tokenization"]
    assert workshop.steps[0].question.choices == ("2", "3", "4") and workshop.steps[0].hints == ("look at the diagonal",)
    assert workshop.steps[1].question.tool == "tokens"
    with pytest.raises(gr.Error, match=r"Not added: line \d+, steps\[2\]\.question\.answer: '9' is not one of"):
        form.add_step(draft, "", "", "More.", "", "choice", "Which?", "a, b", "9", 0, "", "", "", "", "")
    with pytest.raises(gr.Error, match="Write the step's text first"):
        form.add_step(draft, "", "", " ", "", "none", "", "", "", 0, "", "", "", "", "")

    path, said = form.check_and_download(draft, lambda p: view.problems(shared, p))
    assert "2 steps" in said and w.load(open(path, encoding="utf-8").read(), "d.yaml") == workshop
    broken = draft.replace("att.layer=2", "att.layer=99")
    path, said = form.check_and_download(broken, lambda p: view.problems(shared, p))
    assert path["value"] is None and re.search(r"line \d+, steps\[0\]\.view: The link's att.layer=99", said)

    set_, rest = outputs(wt.walk_draft(draft, 4), shared)                # walk it as a student would
    assert set_ == {"att.layer": 2} and "Step 1 of 2" in rest[4] and rest[1]["value"] == 5
