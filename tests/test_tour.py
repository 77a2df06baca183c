"""The guided tour: every step opens a tab that exists and sets controls that exist, to valid values."""

from __future__ import annotations

import gradio as gr
import pytest

from playground.ui import tour
from playground.ui.demo import TABS, tab_id


def test_the_steps_follow_the_lecture_and_name_real_tabs():
    ids = [tab_id(title) for title, _ in TABS]
    assert len(tour.STEPS) >= 8
    assert all(step.tab in ids for step in tour.STEPS)
    order = [ids.index(step.tab) for step in tour.STEPS]
    titles = [step.title for step in tour.STEPS]
    assert titles.index("RNN and vanishing gradients") < titles.index("Seq2seq attention") < \
        titles.index("Self-attention") < titles.index("GPT: predict the next token")
    assert order[0] == 0  # it starts where the page does


def test_every_equation_is_balanced_latex_and_every_text_is_short():
    for step in tour.STEPS:
        assert step.equation.count("{") == step.equation.count("}"), step.title
        assert step.equation.count(r"\left") == step.equation.count(r"\right"), step.title
        assert "$" not in step.equation  # the markdown adds the delimiters
        assert 1 <= step.text.count(". ") + 1 <= 4 and len(step.text) < 420, step.title


def test_every_control_a_step_sets_exists_and_takes_the_value():
    import app

    tour.check_controls(app.demo.view)  # the app's own registry (building the app checked it too)
    with pytest.raises(AssertionError, match="no tab registered"):
        tour.check_controls({})
    layer = gr.Slider(0, 2, value=0, step=1)
    with pytest.raises(AssertionError, match="not a value"):
        tour.check_controls({**app.demo.view, "att.layer": layer})  # 5 does not fit a 3-layer slider


def test_a_step_s_sub_tab_is_one_its_tab_has():
    """A step on a sub-tab names it as a link does (the page opens it: assets/view.js open), and it exists."""
    import app
    from playground.ui.view import sub_tab_ids

    subs = sub_tab_ids(app.demo.shared.tabs)
    for step in tour.STEPS:
        assert not step.sub or step.sub in subs[step.tab], (step.title, step.sub, subs[step.tab])
    assert any(step.sub == "real-vocabularies-side-by-side" for step in tour.STEPS)
