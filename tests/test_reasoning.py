"""Chain of thought and tool calling with SmolLM2 (analysis/reasoning.py, analysis/tool_calling.py,
analysis/calculator.py): the calculator's own grammar, the tool-call parser, each tool's refusals, the agent loop
driven by scripted replies, and the loop and both ways once on the real model (skipped without it)."""

from __future__ import annotations

import json
import re

import pytest

from playground.analysis import calculator, generation, models, reasoning, tool_calling
from playground.analysis.calculator import CalculatorError

needs_smollm2 = pytest.mark.skipif(models.resolve(models.SMOLLM2) is None,
                                   reason="SmolLM2 is not installed (the README's commands install it)")
GREEDY = {"temperature": 0.0, "top_k": 0, "top_p": 1.0}


# ---------------------------------------------------------------------------------------------
# The calculator: its grammar, never eval


@pytest.mark.parametrize("expression, value", [
    ("sqrt(15625)", 125), ("2 ^ 3 ^ 2", 512), ("2**10", 1024), ("-(3) * -2", 6), ("7 / 2", 3.5), ("0.1 + 0.2", 0.3),
    ("1,234 + 1", 1235), ("(1 + 2) * (3 + 4)", 21), ("abs(-4.5)", 4.5), ("1234 * 5678", 7006652), ("10 - 2 - 3", 5),
    ("2 * 3 + 4", 10), ("2 + 3 * 4", 14), ("100 / 10 / 2", 5)])
def test_the_calculator_follows_its_grammar(expression, value):
    assert calculator.evaluate(expression) == value


@pytest.mark.parametrize("expression, value", [
    ("999999999999 + 2", 1000000000001), ("123456789 * 1000003", 123457159370367), ("999999999999999 - 1",
    999999999999998), ("2 ^ 49 + 1", 562949953421313), ("246913578000002 / 2", 123456789000001),
    ("999999999999.0 + 2", 1000000000001)])
def test_whole_numbers_are_exact_up_to_the_limit(expression, value):
    """As the docstring promises: no rounding to 12 digits of a whole number below 1e15 (it gave 1000000000000)."""
    got = calculator.evaluate(expression)
    assert got == value and isinstance(got, int)


@pytest.mark.parametrize("expression, value", [("-3^2", -9), ("-3 ** 2", -9), ("(-3)^2", 9), ("2^-1", 0.5),
                                               ("2 * -3^2", -18), ("-2^2^3", -256)])
def test_a_sign_applies_after_the_power_as_the_tool_tells_the_model(expression, value):
    assert calculator.evaluate(expression) == value
    description = next(t for t in tool_calling.TOOLS if t["name"] == "calculator")["description"]
    assert "-3^2 is -9" in description and "-3^2 is -9" in tool_calling.system_prompt()


@pytest.mark.parametrize("expression, message", [
    ("1 / 0", "division by zero"), ("5 / (2 - 2)", "division by zero"), ("0 ^ -1", "division by zero"),
    ("1" * 10_000, "10,000 characters"), ("2 ^ 10000", "too large"), ("sqrt(-1)", "not a real number"),
    ("__import__('os')", "unexpected character"), ("open(1)", "unknown function 'open'"), ("(1 + 2", "expected ')'"),
    ("", "empty"), ("1 2", "unexpected '2'"), ("(" * 40 + "1" + ")" * 40, "nested parentheses"),
    ("(-8) ^ (1/3)", "not a real number")])
def test_the_calculator_refuses_with_a_message(expression, message):
    with pytest.raises(CalculatorError, match=message.replace("(", r"\(").replace(")", r"\)")):
        calculator.evaluate(expression)
    with pytest.raises(CalculatorError, match="must be text"):
        calculator.evaluate(12)


# ---------------------------------------------------------------------------------------------
# Tool calls: parsing and running


def test_parse_calls_reads_the_format_and_names_what_is_wrong():
    calls, error = tool_calling.parse_calls('<tool_call>[{"name": "capital", "arguments": {"country": "Japan"}}]'
                                            "</tool_call>")
    assert calls == [{"name": "capital", "arguments": {"country": "Japan"}}] and error is None
    assert tool_calling.parse_calls("Tokyo is the capital.") == (None, None)          # no call: an answer
    single, _ = tool_calling.parse_calls('<tool_call>{"name": "capital", "arguments": {}}</tool_call>')
    assert single == [{"name": "capital", "arguments": {}}]                            # one call without [ ]
    assert "never closes" in tool_calling.parse_calls('<tool_call>[{"name": "capital"')[1]
    assert "not valid JSON" in tool_calling.parse_calls("<tool_call>[{name: capital}]</tool_call>")[1]
    assert "should be" in tool_calling.parse_calls('<tool_call>["capital"]</tool_call>')[1]
    assert tool_calling.parse_calls("<tool_call>[]</tool_call>") == ([], None)


def test_each_tool_runs_or_refuses_with_a_message():
    count = lambda text: len(text.split())  # noqa: E731  (a stand-in counter: the loop passes SmolLM2's)
    run = lambda name, **arguments: tool_calling.run_tool({"name": name, "arguments": arguments}, count)  # noqa: E731
    assert run("calculator", expression="1234 * 5678")["result"] == 7006652
    assert run("calculator", expression="1 / 0")["error"] == "division by zero"
    assert "10,000 characters" in run("calculator", expression="9" * 10_000)["error"]
    assert "should be a string, not int" in run("calculator", expression=5)["error"]   # wrong argument type
    assert "missing: expression" in run("calculator")["error"]
    assert "unknown: x" in run("calculator", expression="1", x=2)["error"]
    assert "unknown tool 'weather'" in run("weather", city="Pune")["error"]
    assert run("capital", country="australia")["result"] == "Canberra"
    assert "no capital for 'Atlantis'" in run("capital", country="Atlantis")["error"]
    assert run("count_tokens", text="three words here")["result"] == 3
    assert "at most" in run("count_tokens", text="x" * 3_000)["error"]


def _scripted(monkeypatch, replies: list[str]) -> list[list[dict]]:
    """Drive the loop with scripted replies in place of the model: each reply one step; returns the conversations
    the model was shown, turn by turn."""
    shown = []

    def reply(m, messages, prefix, rule, seed, notices, known):
        shown.append([dict(t) for t in messages])
        text = replies[len(shown) - 1]
        assert text.startswith(prefix)
        return generation.Prompt("", [1] * (10 * len(shown)), frozenset({2})), [
            {"token": text[len(prefix):], "id": 7, "prob": 0.5, "entropy": 1.0},
            {"token": "<|im_end|>", "id": 2, "prob": 0.9, "entropy": 0.5}]

    monkeypatch.setattr(tool_calling, "_reply", reply)
    return shown


class _Model:
    name = "scripted"
    tokenizer = None


def test_the_loop_runs_the_call_sends_the_result_back_and_stops_at_the_answer(monkeypatch):
    shown = _scripted(monkeypatch, ['<tool_call>[{"name": "calculator", "arguments": {"expression": "1234*5678"}}]'
                                    "</tool_call>", "1234 times 5678 is 7006652."])
    data = tool_calling.run(_Model(), "What is 1234 times 5678?", GREEDY, 0, [])
    assert data["stopped"] == "answer" and data["answer"] == "1234 times 5678 is 7006652."
    first = data["turns"][0]
    assert first["forced"] == tool_calling.FORCED and first["results"][0]["result"] == 7006652
    assert json.loads(first["tool_message"].split("\n")[1]) == first["results"]
    assert shown[1][-1] == {"role": "user", "content": first["tool_message"]}          # the result went back
    assert shown[1][-2]["role"] == "assistant" and "calculator" in shown[1][-2]["content"]
    assert "<tools>" in shown[0][0]["content"] and "count_tokens" in shown[0][0]["content"]


def test_an_echoed_tool_response_is_no_answer_in_words(monkeypatch):
    """The 135M model often repeats the <tool_response> turn (with a broken brace) as its last reply: no answer."""
    from playground.figures import generation as fgen

    _scripted(monkeypatch, ['<tool_call>[{"name": "calculator", "arguments": {"expression": "17 * 23 + 4"}}]'
                            "</tool_call>", '<tool_response>\n[{"name": "calculator", "result": 395}}\n'
                                            "</tool_response>"])
    data = tool_calling.run(_Model(), "What is 17 times 23 plus 4?", GREEDY, 0, [])
    assert data["stopped"] == "echo" and data["answer"] is None and len(data["turns"]) == 2
    shown = fgen.tool_turns_html(data)
    assert "did not answer in words" in shown and "Answer:" not in shown


def test_a_reply_stops_at_the_end_of_its_call(monkeypatch):
    """The tool runs before the model writes on: the tokens after </tool_call> (a made-up result) are never made."""
    made = []

    def sampled(m, prompt, n, rule, seed, past=None, last=None):
        steps = []
        for token in ['{"name": "calculator", "arguments": {"expression": "17 * 23 + 4"}}]', "</tool_call",
                      ">\n", "\nThe answer is 17 * 23 + 4 = 349.", "<|im_end|>"]:
            made.append(token)
            steps.append({"token": token, "id": 7, "prob": 0.5, "entropy": 1.0})
            yield steps

    monkeypatch.setattr(generation, "sampled", sampled)
    monkeypatch.setattr(generation, "encode_prompt", lambda m, text, notices: (text, [1, 2, 3]))

    class Chat(_Model):
        kind, model = "llama", None
        card = {"eos_id": 2}
        chat = staticmethod(lambda messages: "chat:")

    Chat.tokenizer = type("T", (), {"token_to_id": staticmethod(lambda t: 0)})()
    _, steps = tool_calling._reply(Chat(), [], tool_calling.FORCED, GREEDY, 0, [], {})
    reply = tool_calling.FORCED + "".join(s["token"] for s in steps)
    assert reply.endswith("</tool_call>\n") and "349" not in "".join(made)


def test_the_system_prompt_examples_are_answerable():
    """Each worked example in the system turn, run by our tools, gives a result (Peru was not in the table)."""
    calls = [json.loads(c)[0] for c in re.findall(r"<tool_call>(\[.*?\])</tool_call>", tool_calling.system_prompt())]
    assert {c["name"] for c in calls} == set(tool_calling.NAMES)
    for call in calls:
        assert "result" in tool_calling.run_tool(call, len), call


def test_a_malformed_call_is_shown_with_its_error_and_the_loop_is_bounded(monkeypatch):
    _scripted(monkeypatch, ['<tool_call>[{"name": "calculator", "arguments": {"expression": 1+}']
              + ["<tool_call>[{oops}]</tool_call>"] * 5)
    notices: list[str] = []
    data = tool_calling.run(_Model(), "What is 2 + 2?", GREEDY, 0, notices)
    assert len(data["turns"]) == tool_calling.MAX_TURNS and data["stopped"] == "turns" and data["answer"] is None
    assert "never closes" in data["turns"][0]["parse_error"] and "not valid JSON" in data["turns"][1]["parse_error"]
    assert "error" in data["turns"][0]["tool_message"] and "Stopped after" in notices[-1]


def test_each_shipped_tool_question_is_answered_by_its_own_call():
    """The evaluation's questions: five per tool, and each one's call, run by our tool, gives its result."""
    from playground.tools import tool_calls

    questions = tool_calls.questions()
    assert sorted(q["tool"] for q in questions) == sorted(tool_calling.NAMES * 5)
    for q in questions:
        ran = tool_calling.run_tool({"name": q["tool"], "arguments": q["arguments"]}, len)
        assert "error" not in ran, (q, ran)
        if q["tool"] != "count_tokens":
            assert ran["result"] == q["result"], q


def test_the_shipped_tool_figures_are_the_apps_loop_counted_as_the_protocol_says():
    """assets/reasoning/tool_results.json: measured with the system turn the app sends, its counts its rows' sums, and
    no echoed <tool_response> counted as an answer in words (the shipped "7 of 15" counted six of them)."""
    from playground.tools import tool_calls

    results = tool_calling.measured()
    assert results and results["complete"] and results["system"] == tool_calling.system_prompt()
    rows = results["rows"]
    assert len(rows) == results["n"] == len(tool_calls.questions())
    assert results["counts"] == {c: sum(r[c] for r in rows) for c in tool_calls.COUNTS}
    assert not any(r["answered"] and tool_calling.ECHO in (r["answer"] or "") for r in rows)
    assert all(r["answer"] is None for r in rows if r["stopped"] == "echo")


def test_the_tool_evaluation_counts_each_step_of_a_call(monkeypatch):
    """parses ⊇ right tool ⊇ right result, and the answer apart: a wrong argument is a right tool and a wrong result;
    a copied placeholder is a parsed call of an unknown tool."""
    from playground.tools import tool_calls

    q = {"id": 1, "question": "What is 1234 * 5678?", "tool": "calculator", "result": 7006652,
         "arguments": {"expression": "1234 * 5678"}}
    cases = {'"1234 * 5678"': (True, True, True, True), '"1234 + 5678"': (True, True, False, True)}
    for expression, want in cases.items():
        _scripted(monkeypatch, ['<tool_call>[{"name": "calculator", "arguments": {"expression": %s}}]</tool_call>'
                                % expression, "It is 7,006,652."])
        row = tool_calls.score(q, tool_calling.run(_Model(), q["question"], GREEDY, 0, []), 7006652)
        assert tuple(row[c] for c in tool_calls.COUNTS) == want, expression
    _scripted(monkeypatch, ['<tool_call>[{"name": "func_name1", "arguments": {"argument1": "value1"}}]</tool_call>',
                            "I cannot."])
    row = tool_calls.score(q, tool_calling.run(_Model(), q["question"], GREEDY, 0, []), 7006652)
    assert (row["parses"], row["right_tool"], row["right_result"], row["answered"]) == (True, False, False, False)
    _scripted(monkeypatch, ["<tool_call>[{oops}]</tool_call>"] * 3)
    row = tool_calls.score(q, tool_calling.run(_Model(), q["question"], GREEDY, 0, []), 7006652)
    assert not row["parses"] and row["parse_error"]


# ---------------------------------------------------------------------------------------------
# Chain of thought: the set and the protocol


def test_the_shipped_problems_and_the_answer_rule():
    problems = reasoning.problems()
    assert len(problems) == 40 and len({p["id"] for p in problems}) == 40
    assert all(isinstance(p["answer"], int) and p["question"].endswith("?") for p in problems)
    assert reasoning.extract_answer("3 + 5 = 8 apples. So Tom has 8.") == 8
    assert reasoning.extract_answer("It costs 1,250 dollars") == 1250 and reasoning.extract_answer("none") is None
    assert reasoning.extract_answer("half is 7.5") == 7.5
    assert reasoning.prompt_text(" Q? ", "step_by_step") == "Q?\n" + reasoning.PROMPTS["step_by_step"]
    results = reasoning.measured()
    if results:   # what the script wrote: its counts agree with its rows
        for way in reasoning.WAYS:
            assert results["correct"][way] == sum(bool(p[way]["correct"]) for p in results["problems"])
            assert all(p[way]["correct"] == (p[way]["answer"] == p["expected"]) for p in results["problems"])


@pytest.mark.slow  # SmolLM2
@needs_smollm2
@pytest.mark.timeout(900)   # about 40 s on an idle 2-core machine; minutes when it is shared
def test_smollm2_answers_both_ways_and_runs_the_loop():
    m = models.get(models.SMOLLM2)
    problem = reasoning.problems()[0]
    data = reasoning.compare(m, problem["question"], GREEDY, 0, [], problem["answer"])
    for way in reasoning.WAYS:
        got = data[way]
        assert got["text"] and 0 < got["n_tokens"] <= reasoning.MAX_NEW[way]
        assert got["answer"] == reasoning.extract_answer(got["text"]) and got["correct"] == (got["answer"] == 8)
        assert all(0 < s["prob"] <= 1 for s in got["steps"])
    loop = tool_calling.run(m, "What is 12 times 3?", GREEDY, 0, [])
    first = loop["turns"][0]
    assert first["reply"].startswith("<tool_call>[") and 1 <= len(loop["turns"]) <= tool_calling.MAX_TURNS
    assert (first["tool_calls"] is not None) != (first["parse_error"] is not None)   # parsed, or its error


@pytest.mark.slow  # SmolLM2
@needs_smollm2
@pytest.mark.timeout(300)
def test_a_turn_runs_only_what_the_conversation_adds_and_answers_as_if_it_ran_it_all(monkeypatch):
    """The system turn's cache and each turn's own (tool_calling._shared): the same replies as a loop that runs
    every turn's whole prompt, each step's probabilities within half-precision rounding; and the same answer, to
    the bit, whether the system turn's cache was made by this run or an earlier one."""
    m = models.get(models.SMOLLM2)
    question = "How many tokens does 'unbelievable' have?"
    tool_calling._SYSTEM_CACHES.clear()
    fresh = tool_calling.run(m, question, GREEDY, 0, [])
    again = tool_calling.run(m, question, GREEDY, 0, [])
    assert again == fresh
    shared = []
    real = tool_calling._shared
    monkeypatch.setattr(tool_calling, "_shared", lambda *a: shared.append(real(*a)) or None)   # every prompt in full
    whole = tool_calling.run(m, question, GREEDY, 0, [])
    assert len(whole["turns"]) >= 2 and all(c is not None and c["idx"].size(1) > 400 for c in shared)
    assert [t["reply"] for t in whole["turns"]] == [t["reply"] for t in fresh["turns"]]
    for cut, full in zip(fresh["turns"], whole["turns"]):
        assert [s["prob"] for s in cut["steps"]] == pytest.approx([s["prob"] for s in full["steps"]], abs=0.02)


# ---------------------------------------------------------------------------------------------
# The figures: every part of a turn and each way said in text


def test_the_figures_say_each_way_and_each_turn_in_text(monkeypatch):
    from playground.figures import generation as fgen

    step = {"token": " 8", "id": 5, "prob": 0.75, "entropy": 1.0}
    way = {"steps": [step], "answer": 8, "correct": True, "n_tokens": 1, "stopped": True}
    html = fgen.way_html({"direct": way, "expected": 8, "prompts": {"direct": "Q?<x>"}}, "direct")
    assert "Directly: answer: 8 · correct (expected 8)" in html and "p = 0.750" in html
    assert '<span class="gen-prompt">Q?&lt;x&gt;\n</span>' in html   # the reply on its own line, not glued to it
    measured = {"model": "m", "n": 2, "decoding": "greedy", "protocol": "P", "command": "c", "seconds": 3.0,
                "correct": {"direct": 1, "step_by_step": 0}, "accuracy": {"direct": 0.5, "step_by_step": 0.0},
                "complete": False, "set_size": 40}
    table = fgen.measured_html(measured)
    assert "1 of 2" in table and "50.0%" in table and "first 2 of the set&#x27;s 40" in table
    assert "Not measured yet" in fgen.measured_html(None)
    _scripted(monkeypatch, ['<tool_call>[{"name": "calculator", "arguments": {"expression": "1/0"}}]</tool_call>',
                            "<tool_call>[{bad}]</tool_call>", "No."])
    turns = fgen.tool_turns_html(tool_calling.run(_Model(), "q", GREEDY, 0, []))
    assert "Tool call, parsed:" in turns and "calculator → error: division by zero" in turns
    assert "Malformed tool call: the tool call is not valid JSON" in turns and "Answer: No." in turns
    assert "&lt;tool_response&gt;" in turns and "&lt;tool_call&gt;[" in turns   # the forced start, escaped
