"""Tool calling with SmolLM2, as plain data: a visible agent loop.

SmolLM2-Instruct learned function calling in its fine-tuning (Argilla's Synth-APIGen data): the tools are offered as
JSON schemas between `<tools>` and `</tools>` in the system turn, and the model calls them by replying with a JSON
list of `{"name": ..., "arguments": {...}}` between `<tool_call>` and `</tool_call>`. The chat template in the GGUF
file (nets/smollm2.py reads it) has system, user and assistant turns and no tool section of its own, so the tools
go in the system turn (SYSTEM) and each result goes back as a user turn holding `<tool_response>` JSON
`</tool_response>`, the way SmolLM2's function-calling examples return them.

The loop (`run`): the model replies; a reply without `<tool_call>` is its answer, unless it only repeats a
`<tool_response>` (the 135M model often echoes the tool's turn instead of answering: that is no answer in words); a
reply stops at its `</tool_call>` (the tool runs before the model writes on: left alone it goes on to guess the
result, or to write the next example's question); a tool call is parsed and checked (a known tool, the arguments its
schema names, with the right types), our tool runs, and its result (or the error) goes back; at most MAX_TURNS model
turns. A reply whose call cannot be parsed is kept as it is, with the parse error, and the error goes back to the
model like a result. Each turn keeps every token with its probability and the top candidates (generation.named).

The tools: `calculator` (analysis/calculator.py: its own grammar, never `eval`), `capital` (a lookup in the shipped
table assets/reasoning/capitals.json) and `count_tokens` (the number of SmolLM2 tokens of a text, by the app's own
tokenizer).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

import torch

from playground.analysis import calculator, generation
from playground.checkpoints import ASSETS_DIR

CAPITALS = ASSETS_DIR / "reasoning" / "capitals.json"
RESULTS = ASSETS_DIR / "reasoning" / "tool_results.json"   # what playground/tools/tool_calls.py measured
MAX_TURNS = 3          # model turns in one run: a call, an answer, and one more call or retry
MAX_REPLY = 96         # new tokens per model turn
MAX_TOOL_TEXT = 2_000  # characters of text a tool takes (count_tokens' text)

TOOLS = [
    {"name": "calculator", "description": "Evaluate an arithmetic expression: numbers, + - * / ^, parentheses, "
                                          "sqrt() and abs(); a minus sign applies after the power (-3^2 is -9). "
                                          "Returns the number.",
     "parameters": {"type": "object", "properties": {"expression": {
         "type": "string", "description": "The expression, for example \"(3 + 4) * 2\"."}},
         "required": ["expression"]}},
    {"name": "capital", "description": "Look up the capital city of a country.",
     "parameters": {"type": "object", "properties": {"country": {
         "type": "string", "description": "The country's English name, for example \"France\"."}},
         "required": ["country"]}},
    {"name": "count_tokens", "description": "Count how many SmolLM2 tokens a text is split into.",
     "parameters": {"type": "object", "properties": {"text": {"type": "string", "description": "The text."}},
                    "required": ["text"]}},
]
NAMES = [tool["name"] for tool in TOOLS]

# The system turn: the tools between <tools> tags and the call format of SmolLM2's function-calling data (a JSON list of
# calls between <tool_call> tags), shown by three worked examples, one per tool, on questions of their own. The format
# line of SmolLM2's own prompt ({"name": "func_name1", "arguments": {"argument1": "value1"}}) was copied as it is:
# with it 3 of the 15 shipped questions got the right tool and none the right result; with the examples 10 and 7
# (playground/tools/tool_calls.py, assets/reasoning/tool_results.json)
SYSTEM = ("You compose function calls. Given a question and the functions below, make one or more function calls "
          "that answer it. If no function fits the question, say so.\n\n"
          "You have these tools:\n<tools>{tools}</tools>\n\n"
          "Reply with the calls as a JSON list between <tool_call> and </tool_call>, and with no other text. Copy the "
          "numbers, the country or the text from the question into the arguments. Examples:\n"
          "Question: What is 2 plus 3?\n"
          '<tool_call>[{{"name": "calculator", "arguments": {{"expression": "2 + 3"}}}}]</tool_call>\n'
          "Question: What is the capital of Peru?\n"
          '<tool_call>[{{"name": "capital", "arguments": {{"country": "Peru"}}}}]</tool_call>\n'
          "Question: How many tokens is 'good morning'?\n"
          '<tool_call>[{{"name": "count_tokens", "arguments": {{"text": "good morning"}}}}]</tool_call>')
CALL_END = "</tool_call>"   # where a reply stops: the tool answers next
ECHO = "<tool_response>"     # a reply holding this repeats the tool's turn: it is not an answer
_CALL = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.DOTALL)
_TYPES = {"string": str, "number": (int, float), "integer": int, "boolean": bool}


class ToolError(ValueError):
    """A tool call that cannot run (unknown tool, wrong arguments) or a tool that refuses its input."""


@lru_cache(maxsize=1)
def capitals() -> dict[str, str]:
    """The shipped lookup table, country -> capital."""
    return json.loads(CAPITALS.read_text(encoding="utf-8"))["capitals"]


def measured() -> dict | None:
    """How often the calls were right on the shipped questions, as the evaluation script wrote it (None before it
    has run)."""
    return json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.is_file() else None


def system_prompt() -> str:
    return SYSTEM.format(tools=json.dumps(TOOLS, ensure_ascii=False))


def parse_calls(reply: str) -> tuple[list[dict] | None, str | None]:
    """The tool calls in a reply: (None, None) when it has no `<tool_call>` (an answer), (calls, None) when they
    parse, (None, the parse error) when they do not. Each call is {"name": str, "arguments": dict}; one call
    written without the list's brackets is accepted as a list of one."""
    match = _CALL.search(reply)
    if not match:
        return None, None
    body, closed = match.group(1).strip(), match.group(2)
    if not closed:
        return None, "the reply opens <tool_call> but never closes it (</tool_call>)"
    try:
        calls = json.loads(body) if body else []
    except json.JSONDecodeError as err:
        return None, f"the tool call is not valid JSON: {err.msg} at line {err.lineno} column {err.colno}"
    calls = [calls] if isinstance(calls, dict) else calls
    if not isinstance(calls, list):
        return None, f"the tool call should be a JSON list of calls, not {type(calls).__name__}"
    for n, call in enumerate(calls, 1):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) \
                or not isinstance(call.get("arguments", {}), dict):
            return None, f'call {n} should be {{"name": "...", "arguments": {{...}}}}, not {json.dumps(call)[:80]}'
        call.setdefault("arguments", {})
    return calls, None


def _check_arguments(name: str, arguments: dict) -> None:
    """The arguments against the tool's schema: each required one given, none unknown, each of its type."""
    schema = next(tool for tool in TOOLS if tool["name"] == name)["parameters"]
    missing = [a for a in schema["required"] if a not in arguments]
    unknown = [a for a in arguments if a not in schema["properties"]]
    if missing or unknown:
        raise ToolError(f"{name} takes {', '.join(schema['properties'])}"
                        + (f"; missing: {', '.join(missing)}" if missing else "")
                        + (f"; unknown: {', '.join(map(str, unknown))}" if unknown else ""))
    for arg, value in arguments.items():
        wanted = schema["properties"][arg]["type"]
        if not isinstance(value, _TYPES[wanted]) or isinstance(value, bool) and wanted != "boolean":
            raise ToolError(f"{name}: the argument {arg} should be a {wanted}, not {type(value).__name__} "
                            f"({json.dumps(value)[:40]})")


def token_counter(m):
    """count_tokens' count: the number of the model's tokens of a text, no special tokens."""
    return lambda text: len(m.tokenizer.encode(text, add_special_tokens=False).ids)


def run_tool(call: dict, count_tokens) -> dict:
    """Run one parsed call: {name, arguments, result} or {name, arguments, error}. `count_tokens(text) -> int` is
    the app's tokenizer count (SmolLM2's)."""
    name, arguments = call["name"], call["arguments"]
    try:
        if name not in NAMES:
            raise ToolError(f"unknown tool {name[:40]!r}; the tools are {', '.join(NAMES)}")
        _check_arguments(name, arguments)
        if name == "calculator":
            result = calculator.evaluate(arguments["expression"])
        elif name == "capital":
            table = {country.lower(): city for country, city in capitals().items()}
            country = arguments["country"].strip()
            if country.lower() not in table:
                raise ToolError(f"no capital for {country[:40]!r} in the table ({len(table)} countries)")
            result = table[country.lower()]
        else:
            if len(arguments["text"]) > MAX_TOOL_TEXT:
                raise ToolError(f"count_tokens reads at most {MAX_TOOL_TEXT:,} characters")
            result = count_tokens(arguments["text"])
    except (ToolError, calculator.CalculatorError) as err:
        return {"name": name, "arguments": arguments, "error": str(err)}
    return {"name": name, "arguments": arguments, "result": result}


def _reply(m, messages: list[dict], prefix: str, rule: dict, seed: int, notices: list[str],
           known: dict) -> tuple[generation.Prompt, list]:
    """One model turn: the conversation through the chat template (and `prefix`, the start of the reply when the
    app forces a call), decoded to the end of turn, to the token that closes a call (CALL_END) or to MAX_REPLY new
    tokens. `known["cache"]`: the step cache of the conversation so far (the system turn's to begin with), from
    which only the new tokens are run; replaced by this turn's."""
    text, ids = generation.encode_prompt(m, m.chat(messages) + prefix, notices)
    prompt = generation.Prompt(text, ids, generation.stops(m))
    steps: list[dict] = []
    written = prefix
    for steps in generation.sampled(m, prompt, MAX_REPLY, rule, seed, past=_shared(m, known.get("cache"), ids),
                                    last=known):
        written += steps[-1]["token"]
        if CALL_END in written:
            break
    return prompt, steps


def _shared(m, cache: dict | None, ids: list[int]) -> dict | None:
    """The part of the step `cache` that `ids` begin with (at least one id left to run), or None. Where a turn goes
    on from depends only on the conversation's text, so the same question and seed give the same answer whatever ran
    before (a position's cache is computed in the same pieces every time)."""
    if cache is None or not hasattr(m.model, "crop_cache"):
        return None
    seen = cache["idx"][0].tolist()
    n = next((i for i, (a, b) in enumerate(zip(seen, ids)) if a != b), min(len(seen), len(ids)))
    n = min(n, len(ids) - 1)
    return m.model.crop_cache(cache, n) if n > 0 else None


_SYSTEM_CACHES: dict = {}   # (model name, its module's id) -> the step cache of the system turn


def _system_cache(m) -> dict | None:
    """The step cache of SYSTEM's turn as the chat template writes it, computed once per loaded model: every run
    begins with these 464 tokens (20.4 MB of float32 keys and values), half of a run's time when each turn ran them
    again (measured: 7.5 s a question, one thread). Every run reuses it, so a run's first turn is always computed in
    the same two pieces."""
    if getattr(m, "chat", None) is None or not hasattr(m.model, "crop_cache"):
        return None
    key = (m.name, id(m.model))
    if key not in _SYSTEM_CACHES:
        _, ids = generation.encode_prompt(m, m.chat([{"role": "system", "content": system_prompt()}]), [])
        with torch.no_grad():
            _SYSTEM_CACHES[key] = m.model.step(torch.tensor([ids]))[1]
    return _SYSTEM_CACHES[key]


FORCED = "<tool_call>["   # the start of the first reply when a call is forced (an API's tool_choice="required")


def run(m, question: str, rule: dict, seed: int, notices: list[str], force_call: bool = True) -> dict:
    """The `chat_tools` endpoint's JSON: {model, question, tools, system, force_call, temperature, top_k, top_p, seed,
    turns, answer, stopped, notices}. Each turn: {turn, prompt_tokens, forced (the reply's start the app wrote, or
    ""), reply (forced start included), steps (the model's tokens), tool_calls (parsed, or None), parse_error,
    results, tool_message}. `stopped`: "answer"; "echo" when the last reply repeats a `<tool_response>` instead of
    answering (`answer` None: no answer in words); or "turns" when MAX_TURNS ran out. With `force_call` the first reply
    starts with FORCED, so the model must write a call (the 135M model, asked freely, mostly answers by itself)."""
    messages = [{"role": "system", "content": system_prompt()}, {"role": "user", "content": question}]
    count = token_counter(m)
    turns, answer, stopped = [], None, "turns"
    known = {"cache": _system_cache(m)}   # each turn runs only what the conversation adds
    for n in range(1, MAX_TURNS + 1):
        forced = FORCED if force_call and n == 1 else ""
        prompt, steps = _reply(m, messages, forced, rule, seed, notices, known)
        reply = forced + "".join(s["token"] for s in steps if s["id"] not in prompt.stops)
        calls, error = parse_calls(reply)
        turn = {"turn": n, "prompt_tokens": len(prompt.ids), "forced": forced, "reply": reply, "steps": steps,
                "tool_calls": calls, "parse_error": error, "results": [], "tool_message": None}
        turns.append(turn)
        if calls is None and error is None or calls == []:   # no call (or an empty list): the model's answer
            answer, stopped = (None, "echo") if ECHO in reply else (reply, "answer")
            break
        if error is None:
            turn["results"] = [run_tool(call, count) for call in calls]
        payload = turn["results"] if error is None else [{"error": error}]
        turn["tool_message"] = f"<tool_response>\n{json.dumps(payload, ensure_ascii=False)}\n</tool_response>"
        messages += [{"role": "assistant", "content": reply.strip()},
                     {"role": "user", "content": turn["tool_message"]}]
    if stopped == "turns":
        notices.append(f"Stopped after {MAX_TURNS} model turns without an answer in words.")
    return {"model": m.name, "question": question, "tools": TOOLS, "system": messages[0]["content"],
            "force_call": force_call, **rule, "seed": seed, "turns": turns, "answer": answer, "stopped": stopped,
            "notices": notices}
