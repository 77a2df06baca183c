"""Workshops (analysis/workshops.py): the file format, its validation (every message names a line and a field),
grading, and the tools that compute an answer (analysis/workshop_tools.py) against independent references."""

from __future__ import annotations

import json

import numpy as np
import pytest

from playground import checkpoints
from playground.analysis import exercises as ex
from playground.analysis import workshop_tools as tools
from playground.analysis import workshops as w

GOOD = """\
title: A small workshop
steps:
  - view: tab=tokenization
    text: Look at the tokens.
    hints: [count the pieces]
    question:
      prompt: How many tokens does our BPE make of your name?
      kind: number
      tool: tokens
      args: {tokenizer: bpe, text: "{input}"}
      input: Your name
      example: Ada
  - view: tab=attention&att.layer=2
    text: A choice.
    question: {prompt: "Which?", kind: choice, choices: [Alpha, Beta], answer: beta}
  - text: A number within a tolerance.
    question: {prompt: "How much?", kind: number, answer: 1024, tolerance: 2, words: [never]}
  - text: A short text.
    question: {prompt: "What?", kind: text, accept: [chosen and rejected, "##"]}
"""


def as_json_text(yaml_text: str) -> str:
    import yaml

    return json.dumps(yaml.safe_load(yaml_text), indent=2, ensure_ascii=False)


def messages(text: str, name: str = "w.yaml", **kw) -> list[str]:
    with pytest.raises(w.WorkshopError) as err:
        w.load(text, name, **kw)
    return err.value.messages


def test_a_good_file_loads_in_yaml_and_in_json_alike():
    a = w.load(GOOD, "small.yaml")
    b = w.load(as_json_text(GOOD), "small.json")
    assert a == b and a.id == "small" and len(a.steps) == 4
    assert a.steps[0].question.tool == "tokens" and a.steps[0].hints == ("count the pieces",)
    assert w.parse_view(a.steps[1].view) == {"tab": "attention", "att.layer": "2"}
    assert w.parse_view("http://host:7860/?tab=embeddings&emb.dims=2") == {"tab": "embeddings", "emb.dims": "2"}


def test_a_wrong_field_is_named_with_its_line_in_yaml_and_in_json():
    bad = GOOD.replace("tool: tokens", "tool: tokenz").replace("answer: 1024", "answer: lots")
    found = messages(bad)
    assert any(m.startswith("line 9, steps[0].question.tool: unknown tool 'tokenz'") for m in found), found
    assert any(m.startswith("line 17, steps[2].question.answer: should be a number") for m in found), found
    text = as_json_text(bad)
    line = next(i for i, l in enumerate(text.splitlines(), 1) if '"tool": "tokenz"' in l)
    found = messages(text, "w.json")
    assert any(m.startswith(f"line {line}, steps[0].question.tool: unknown tool") for m in found), found


def test_malformed_files_say_the_line():
    assert messages("title: x\nsteps:\n  - text: [unclosed\n")[0].startswith("line 4: not valid YAML")
    assert messages('{\n  "title": "x",\n  "steps": [\n}', "w.json")[0].startswith("line 4: not valid JSON")
    assert messages("") == ["The workshop file is empty."]
    assert "at most" in messages("title: x\n" + "#" * (w.MAX_FILE + 1))[0]
    assert messages("- a list\n") == ["The workshop should be a mapping with `title` and `steps`."]


@pytest.mark.parametrize("change, expected", [
    (("kind: choice, choices: [Alpha, Beta], answer: beta", "kind: choice, choices: [Alpha, Beta], answer: gamma"),
     "line 15, steps[1].question.answer: 'gamma' is not one of the choices"),
    (("kind: number, answer: 1024", "kind: numeral, answer: 1024"), "line 17, steps[2].question.kind: `kind` should"),
    (("{tokenizer: bpe,", "{tokenizer: bpe, colour: red,"), "line 10, steps[0].question.args.colour: tokens takes no"),
    (("{tokenizer: bpe,", "{tokenizer: klingon,"), "line 10, steps[0].question.args.tokenizer: unknown tokenizer"),
    (("      example: Ada\n", ""), "line 6, steps[0].question: a tool argument says {input}"),
    (("  - text: A short text.", "  - txt: A short text."), "line 18, steps[3]: `text` is required"),
    (("att.layer=2", "att.layer=2&att.layer=3"), "line 13, steps[1].view: the view gives att.layer more than once"),
    (("accept: [chosen", "answer: x, accept: [chosen"), "line 19, steps[3].question.answer: a text question lists"),
])
def test_each_mistake_names_its_line_and_field(change, expected):
    found = messages(GOOD.replace(*change))
    assert any(m.startswith(expected) for m in found), found


def test_a_removed_model_or_an_answer_that_cannot_be_computed_is_found_at_load():
    removed = GOOD.replace('tool: tokens\n      args: {tokenizer: bpe, text: "{input}"}',
                           'tool: fill_mask\n      args: {model: bert-gone, text: "{input} [MASK]"}')
    assert any("args.model: the model 'bert-gone' is not available here" in m for m in messages(removed))
    too_far = GOOD.replace("  - text: A number", "  - text: x\n    question: {prompt: p, kind: text, tool: bpe_merge, "
                           "args: {table: \"ab 2\", step: 9}}\n  - text: A number")
    found = messages(too_far)
    assert found == ["steps[2].question.tool: bpe_merge cannot compute an answer: BPE makes only 2 merges of this "
                     "table, not 9"], found
    assert w.load(too_far, compute=False).steps[2].question.tool == "bpe_merge"   # validation alone passes


def test_a_view_is_checked_by_the_parser_handed_in():
    seen = []

    def check(params):
        seen.append(params)
        return ["The link's att.layer=2 is out of range"] if params.get("att.layer") == "2" else []

    found = messages(GOOD, check_view=check)
    assert found == ["line 13, steps[1].view: The link's att.layer=2 is out of range"]
    assert {"tab": "tokenization"} in seen


def test_grading_normalises_case_and_spaces_and_keeps_the_tolerance():
    steps = w.load(GOOD).steps
    choice, number, text = steps[1].question, steps[2].question, steps[3].question
    assert w.grade(choice, "  BETA ")["correct"] and not w.grade(choice, "alpha")["correct"]
    with pytest.raises(ValueError, match="one of: Alpha, Beta"):
        w.grade(choice, "gamma")
    assert w.grade(number, "1025.5")["correct"] and not w.grade(number, "1027")["correct"]
    assert not w.grade(number, "Never")["correct"] and w.grade(number, "Never")["given"] == "never"
    with pytest.raises(ValueError, match="should be a number"):
        w.grade(number, "lots")
    assert w.grade(text, "Chosen   AND rejected")["correct"] and w.grade(text, "##")["correct"]
    assert not w.grade(text, "good and bad")["correct"]
    with pytest.raises(ValueError, match="10,000 characters long"):
        w.grade(text, "x" * 10_000)
    with pytest.raises(ValueError, match="empty"):
        w.grade(text, "   ")


def test_a_tool_question_is_graded_on_the_students_own_input():
    q = w.load(GOOD).steps[0].question
    from tokenizers import Tokenizer   # the library itself, not our analysis code

    reference = Tokenizer.from_file(str(checkpoints.MODELS_DIR / "tok-bpe" / "tokenizer.json"))
    n = len(reference.encode("Grace Hopper", add_special_tokens=False).tokens)
    verdict = w.grade(q, str(n), "Grace Hopper")
    assert verdict["correct"] and verdict["answer"] == str(n) and verdict["computed"] and "Grace Hopper" in verdict["why"]
    assert not w.grade(q, str(n + 1), "Grace Hopper")["correct"]
    with pytest.raises(ValueError, match="Type Your name first"):
        w.grade(q, "3", "")
    with pytest.raises(ValueError, match="at most 200"):
        w.grade(q, "3", "x" * 10_000)


def test_the_json_for_students_has_no_fixed_answer():
    data = w.as_json(w.load(GOOD))
    text = json.dumps(data)
    assert "1024" not in text and "rejected" not in text and data["n_steps"] == 4
    assert data["steps"][0]["question"]["computed"] and data["steps"][0]["hints"] == ["count the pieces"]


def test_wordpiece_counts_agree_with_transformers():
    transformers = pytest.importorskip("transformers")
    reference = transformers.BertTokenizerFast.from_pretrained(str(checkpoints.minilm_dir()))
    for text in ("Ada Lovelace", "unbelievably", "Tokenization of naïve words"):
        assert tools.compute("tokens", {"tokenizer": "minilm", "text": text})[0] == str(len(reference.tokenize(text)))


def test_the_top_head_is_the_one_transformers_attention_says():
    """The previous-token head of every MiniLM layer, from transformers' BertModel's own attention weights."""
    transformers = pytest.importorskip("transformers")
    import torch

    text = "The bank by the river was closed on Sunday."
    tok = transformers.BertTokenizerFast.from_pretrained(str(checkpoints.minilm_dir()))
    ref = transformers.BertModel.from_pretrained(str(checkpoints.minilm_dir()), attn_implementation="eager").eval()
    with torch.no_grad():
        A = ref(**tok(text, return_tensors="pt"), output_attentions=True).attentions   # L x (1, H, T, T)
    for layer, a in enumerate(A):
        a = a[0].numpy()
        T = a.shape[-1]
        previous = a[:, np.arange(1, T), np.arange(T - 1)].mean(-1)                     # (H,)
        answer = tools.compute("top_head", {"model": "minilm", "text": text, "layer": layer, "statistic": "previous"})
        assert answer[0] == str(int(np.argmax(previous))), layer
        assert f"{previous.max():.0%}" in answer[1]


def test_bad_tool_arguments_are_refused_with_a_message():
    with pytest.raises(tools.ToolError, match="layers 0 to 5, not 9"):
        tools.compute("top_head", {"model": "minilm", "text": "a b", "layer": 9})
    with pytest.raises(tools.ToolError, match="needs a \\[MASK\\]"):
        tools.compute("fill_mask", {"model": "minilm-mlm", "text": "no blank here"})
    with pytest.raises(tools.ToolError, match="args.layer: should be a whole number"):
        tools.compute("top_head", {"model": "minilm", "text": "a b", "layer": 1.5})
    with pytest.raises(tools.ToolError, match="unknown tool"):
        tools.compute("nope", {})


def test_the_quiz_is_the_shipped_workshop_file():
    quiz = w.load_shipped("quiz")
    assert [e.id for e in ex.EXERCISES] == [s.question.id for s in quiz.steps]
    assert all(s.question.tool for s in quiz.steps)        # every answer computed, none written in the file
    assert [e.question for e in ex.EXERCISES] == [s.question.prompt for s in quiz.steps]


def test_every_shipped_workshop_is_valid_and_every_topic_has_one():
    names = {p.stem for p in w.shipped_files()}
    assert {"quiz", "tokenization", "embeddings", "rnns", "attention", "bert", "gpt", "finetuning",
            "causal"} <= names
    for name in names:
        workshop = w.load_shipped(name)
        assert workshop.id == name and all(s.text for s in workshop.steps)
        assert any(s.question for s in workshop.steps), name
