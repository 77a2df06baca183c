"""The Generation tab's reasoning panels with SmolLM2-135M-Instruct: chain of thought (a question answered directly
and step by step, side by side, with the accuracy the included script measured) and a visible tool-calling loop.
Laid out by generation_tab.build; the data comes from analysis/reasoning.py and analysis/tool_calling.py."""

from __future__ import annotations

import gradio as gr

from playground.analysis import models, reasoning, tool_calling
from playground.figures import generation as fgen
from playground.ui.common import (FIGURE, as_float, as_int, json_file, refuse_missing_smollm2, text_input,
                                  things_to_try, warn)

MAX_SEED = 2**31 - 1
MAX_QUESTION = 1_000   # characters of a question (a longer one is cut, with a notice)
TOOL_EXAMPLES = [("arithmetic", ["What is 1234 times 5678?"]), ("a capital", ["What is the capital of Australia?"]),
                 ("a token count", ["How many tokens is the sentence 'Tokenization is fun'?"])]


def _smollm2() -> models.Model:
    refuse_missing_smollm2(models.SMOLLM2)
    return models.get(models.SMOLLM2)


def _inputs(question, temperature, seed, notices: list[str]) -> tuple[str, dict, int]:
    """The question (trimmed, cut to MAX_QUESTION), the decoding rule (temperature 0: greedy) and the seed."""
    question = text_input(question, notices, max_chars=MAX_QUESTION).strip()
    if not question:
        raise gr.Error("Type a question for SmolLM2, e.g. 'What is 1234 times 5678?'.")
    t = as_float(temperature, "Temperature", 0.0, 2.0, notices)
    return question, {"temperature": t, "top_k": 0, "top_p": 1.0}, as_int(seed, "Seed", 0, MAX_SEED, notices)


def chain_of_thought(question, temperature=0.0, seed=0):
    """The question answered directly and step by step, same decoding rule and seed; a shipped problem's known
    answer marks each way right or wrong."""
    notices: list[str] = []
    question, rule, seed = _inputs(question, temperature, seed, notices)
    expected = next((p["answer"] for p in reasoning.problems() if p["question"] == question), None)
    m = _smollm2()
    warn(notices)
    data = reasoning.compare(m, question, rule, seed, notices, expected)
    return (fgen.way_html(data, "direct"), fgen.way_html(data, "step_by_step"),
            json_file(data, "chain-of-thought"), data)


def chat_tools(question, temperature=0.0, seed=0, force_call=True):
    """The agent loop on one question: each model turn, the parsed tool call, our tool's result, the answer.
    `force_call`: the first reply starts with `<tool_call>[` (the 135M model, asked freely, mostly answers alone)."""
    notices: list[str] = []
    question, rule, seed = _inputs(question, temperature, seed, notices)
    if not isinstance(force_call, bool):
        raise gr.Error("Force a tool call should be true or false.")
    m = _smollm2()
    warn(notices)
    data = tool_calling.run(m, question, rule, seed, notices, force_call)
    if data["stopped"] == "turns":
        warn(notices[-1:])   # the loop's own notice: it ran out of turns
    return fgen.tool_turns_html(data), json_file(data, "chat-tools"), data


COT_MD = """**Chain of thought** (Wei et al. 2022; "Let's think step by step", Kojima et al. 2022): the same question,
answered once directly and once asked to write its steps first, with the same decoding rule and seed. Pick one of the
shipped word problems (its known answer marks each way right or wrong) or type your own. Below, the accuracy of
each way on the whole set, measured by the included script: a 135M model may gain nothing from thinking aloud."""

TOOLS_MD = """**Tool calling**: the tools are offered to SmolLM2 in its function-calling format (JSON schemas between
`<tools>` tags in the system turn, with one worked example per tool); when it replies with
`<tool_call>[...]</tool_call>`, the call is parsed and shown as JSON, our tool runs (a calculator with its own
grammar, never `eval`; a table of capitals; SmolLM2's token count), and its result goes back as a `<tool_response>`
turn; the model then answers. A reply stops at its `</tool_call>`: the tool runs before the model writes on (left
alone, it goes on to guess the result). The 135M model mostly repeats the `<tool_response>` instead of answering:
that is shown as no answer in words. At most {turns} model turns; a call that does not parse is shown as it is, with
the error (which also goes back). Asked freely, the 135M model mostly answers by itself (and gets 1234 × 5678 wrong), so
by default the app starts its first reply with `<tool_call>[` (what an API's `tool_choice="required"` does), shown in
grey as part of the prompt. Below the loop: how often its calls were right on the shipped questions, measured by the
included script."""


def build(demo: gr.Blocks) -> None:
    """The two panels, each an accordion run by its button (SmolLM2 loads on first use); without SmolLM2, why
    not and how to add it."""
    if models.resolve(models.SMOLLM2) is None:  # said where they would be, with how to add the model
        gr.Markdown(f"**Chain of thought and tool calling with SmolLM2** need it. {models.missing()}",
                    elem_id="smollm2-missing")
        return
    problems = reasoning.problems()
    with gr.Accordion("Chain of thought with SmolLM2: directly, or step by step", open=False):
        gr.Markdown(COT_MD)
        with gr.Row():
            cot_question = gr.Textbox(problems[0]["question"], label="Question", lines=2, scale=3)
            cot_pick = gr.Dropdown([(f"{p['id']}. {p['question']}", p["question"]) for p in problems],
                                   value=None, label="Or a shipped word problem", scale=2)
        with gr.Row():
            cot_temperature = gr.Slider(0, 2, value=0, step=0.05, label="Temperature (0 = greedy)")
            cot_seed = gr.Number(0, label="Seed", precision=0, minimum=0, maximum=MAX_SEED)
            cot_run = gr.Button("Answer both ways", variant="primary", scale=0)
        with gr.Row():
            direct_view = gr.HTML(elem_classes=FIGURE, elem_id="cot-direct")
            steps_view = gr.HTML(elem_classes=FIGURE, elem_id="cot-steps")
        gr.HTML(fgen.measured_html(reasoning.measured()), elem_id="cot-measured")
        with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
            cot_file = gr.DownloadButton("Download JSON", size="sm")
            cot_json = gr.JSON(label="chain_of_thought")
    cot_pick.change(lambda q: q or gr.skip(), inputs=cot_pick, outputs=cot_question, api_visibility="private",
                    queue=False, show_progress="hidden")
    gr.on([cot_run.click, cot_question.submit], chain_of_thought, inputs=[cot_question, cot_temperature, cot_seed],
          outputs=[direct_view, steps_view, cot_file, cot_json], api_name="chain_of_thought")

    with gr.Accordion("Tool calling with SmolLM2: a visible agent loop", open=False):
        gr.Markdown(TOOLS_MD.format(turns=tool_calling.MAX_TURNS))
        with gr.Row():
            tool_question = gr.Textbox(TOOL_EXAMPLES[0][1][0], label="Question", lines=2, scale=3)
            tool_temperature = gr.Slider(0, 2, value=0, step=0.05, label="Temperature (0 = greedy)")
            tool_seed = gr.Number(0, label="Seed", precision=0, minimum=0, maximum=MAX_SEED)
            tool_force = gr.Checkbox(True, label="Force a tool call: start the first reply with <tool_call>[")
            tool_run = gr.Button("Run the loop", variant="primary", scale=0)
        things_to_try(TOOL_EXAMPLES, [tool_question])
        turns_view = gr.HTML(elem_classes=FIGURE, elem_id="tool-turns")
        gr.HTML(fgen.tool_measured_html(tool_calling.measured()), elem_id="tool-measured")
        with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
            tool_file = gr.DownloadButton("Download JSON", size="sm")
            tool_json = gr.JSON(label="chat_tools")
    gr.on([tool_run.click, tool_question.submit], chat_tools,
          inputs=[tool_question, tool_temperature, tool_seed, tool_force], outputs=[turns_view, tool_file, tool_json],
          api_name="chat_tools")
