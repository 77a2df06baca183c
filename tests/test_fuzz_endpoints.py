"""Every endpoint, found in the app itself (not a hand list), called with random values for each of its
inputs by component type: random Unicode of any length, numbers of any kind, valid and invalid choices,
missing values. The handler either answers or refuses with a gr.Error that says what is wrong.

FUZZ_EXAMPLES sets the examples per endpoint (12 by default).
"""

from __future__ import annotations

import inspect
import os

import gradio as gr
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.endpoints import HELD, REFUSED_WITH_DEFAULTS
from tests.fuzzing import accepts, numbers, texts

import app  # noqa: E402  (the real app: its endpoints are what users reach)

app.configure_process()  # as `python app.py` serves them: Gradio's patches, torch's threads, the generation engine

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "12"))
LONG = st.tuples(st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=40),  # ~100 kB of one piece
                 st.integers(20_000, 100_000)).map(lambda t: (t[0] * (t[1] // len(t[0]) + 1))[:t[1]])
# Each of SmolLM2's endpoints decodes hundreds of tokens per call (about a minute of an example's time on a loaded
# machine), or measures five formats of it (quantization: seconds a text): a pytest-xdist group of its own each
# (tests/conftest.py: XdistGroups), so the two workers share them.
# Chain of thought's two answers decode at most CHEAP_COT new tokens here: the user's inputs reach the model only
# as the prompt (read whole, the same code path), and what it writes only feeds the answer rule, which
# test_reasoning.py checks, with SmolLM2's full-length answers in test_smollm2_answers_both_ways_and_runs_the_loop
# (which runs the tool-calling loop at full length too; here its turns are cut to CHEAP_REPLY: 155 -> 37 s).
SMOLLM2_ENDPOINTS = ("chain_of_thought", "chat_tools", "quantization", "speculative")
CHEAP_COT = {"direct": 8, "step_by_step": 8}
CHEAP_REPLY = 24  # tool calling's new tokens per model turn here (96 in the app): the same loop, parse and refusals
ENDPOINTS = {fn.api_name: fn for fn in app.demo.fns.values() if fn.api_visibility == "public" and fn.fn is not None}


def choices(component) -> list:
    return [value for _, value in getattr(component, "choices", None) or []]


# Shapes no component sends, which API callers can (each crashed an endpoint once: a list where one choice goes,
# 10**400 where a number goes)
SHAPES = st.one_of(st.lists(st.one_of(st.text(max_size=12), st.integers()), max_size=3),
                   st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
                   st.just(10**400), st.just(-(10**400)), st.just([10**5000]))


def strategy(component):
    """Any value a caller could send for this component (a gr.State is the session's, which no caller sets)."""
    return usual(component) if isinstance(component, gr.State) else st.one_of(usual(component), SHAPES)


def usual(component):
    """The values of this component's own type, valid or not."""
    if isinstance(component, (gr.Textbox, gr.Code)):
        return st.one_of(texts, LONG)
    if isinstance(component, (gr.Number, gr.Slider)):
        return numbers
    if isinstance(component, gr.CheckboxGroup):
        return st.one_of(st.none(), st.lists(st.sampled_from(choices(component) + ["bogus", ""]), max_size=4))
    if isinstance(component, (gr.Dropdown, gr.Radio)):
        return st.one_of(st.none(), st.sampled_from(choices(component)), texts, numbers)
    if isinstance(component, gr.Checkbox):
        return st.one_of(st.booleans(), st.none(), texts)
    if isinstance(component, gr.State):
        return st.one_of(st.none(), st.just({}), st.just({"tokens": []}))
    return st.one_of(st.none(), texts, numbers)


def run(fn, args):
    out = fn(*args)
    if inspect.isgenerator(out):  # streaming handlers: run them to the end
        *_, out = out
    return out


def test_every_named_endpoint_is_fuzzed():
    assert len(ENDPOINTS) >= 25 and {"tokenize", "attention", "generate", "fill_mask", "seq2seq"} <= set(ENDPOINTS)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["embed_words", "analogy", "attention", "attention_steps", "semantic_search",
                                  "contextual", "embed_sentences", "generate", "compare_generate", "memory_experiment"])
def test_the_shapes_that_crashed_are_refused_or_clamped(name):
    """The issue's findings: ["word2vec"] or ["minilm"] where one choice goes, 10**400 as a number."""
    block_fn = ENDPOINTS[name]
    for i, component in enumerate(block_fn.inputs):
        values = [HELD.get((name, p), c.value) for p, c in zip(inspect.signature(block_fn.fn).parameters, block_fn.inputs)]
        if isinstance(component, (gr.Dropdown, gr.Radio)) and not getattr(component, "multiselect", False):
            values[i] = [values[i]]
        elif isinstance(component, (gr.Number, gr.Slider)) and (name, list(inspect.signature(block_fn.fn).parameters)[i]) not in HELD:
            values[i] = 10**400
        else:
            continue
        accepts(run, block_fn.fn, values)  # answers, or a gr.Error that says what is wrong


@pytest.mark.slow  # hypothesis over every endpoint, SmolLM2's too
@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.xdist_group(f"fuzz-{name}"))
                                  if name in SMOLLM2_ENDPOINTS else name for name in sorted(ENDPOINTS)])
def test_endpoint_answers_or_says_what_is_wrong(name, monkeypatch):
    from playground.analysis import reasoning, tool_calling

    monkeypatch.setattr(reasoning, "MAX_NEW", CHEAP_COT)
    monkeypatch.setattr(tool_calling, "MAX_REPLY", CHEAP_REPLY)
    block_fn = ENDPOINTS[name]
    # the cut answers must not stay in the app's shared answer cache: later tests of this worker's app (the same
    # object) read the full ones, and tests/test_compute_served.py found the cut one given for the page's defaults
    handler = block_fn.fn.__wrapped__ if name in SMOLLM2_ENDPOINTS else block_fn.fn
    params = [p for p in inspect.signature(block_fn.fn).parameters.values()
              if not isinstance(p.default, (gr.Progress, gr.Request))]
    values, wild = [], []
    for param, component in zip(params, block_fn.inputs):
        held = HELD.get((name, param.name))
        values.append(held if held is not None else component.value)
        wild.append(None if held is not None else strategy(component))
    fuzzable = [i for i, w in enumerate(wild) if w is not None]

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def check(data):
        """One or two inputs random, the others as the UI sets them: a bad value must not hide behind another."""
        args = list(values)
        if fuzzable:
            for i in data.draw(st.sets(st.sampled_from(fuzzable), min_size=1, max_size=2)):
                args[i] = data.draw(wild[i])
        outcomes.append(accepts(run, handler, args) is not None)

    outcomes = [accepts(run, handler, list(values)) is not None]  # the UI's own values first
    check()
    if name in REFUSED_WITH_DEFAULTS:
        assert not outcomes[0], f"{name} answered without the session or room it needs"
    else:
        assert outcomes[0], f"{name} refused the values the UI starts with"
