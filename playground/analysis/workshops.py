"""Workshops a lecturer writes: an ordered list of steps, each a view of the app with text, hints and a question.

A workshop is a YAML or JSON file (the schema: docs/workshops.md). Each step names a **view** in the app's own link
syntax (the query string a link carries: `tab=attention&text=...&att.layer=2`, playground/ui/view.py), says what to
look at, may give hints, and may ask one question of four kinds:

- `choice`: one of `choices`, the right one `answer`;
- `number`: a number, right within `tolerance` of `answer` (and `words` such as 'never' accepted as they are);
- `text`: a short text, right when it is one of `accept` (compared without case and extra spaces);
- any of the three with `tool` instead of a fixed answer: the right answer is what the app computes at grading time
  (analysis/workshop_tools.py), on the student's own `input` where an argument says {input}.

Loading is validation: every message names the line and the field (`line 12, steps[2].question.tool: unknown tool
'tokenz'`), and a view is checked with the app's own link parser (the caller hands it in: the UI owns the
components). A tool question is computed once when the workshop is loaded (`precompute`), so a removed model or a
bad argument is found before the lecture, not during it. Plain data: no gradio here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable
from urllib.parse import parse_qsl, urlsplit

import yaml

from playground import checkpoints
from playground.analysis import workshop_tools as tools

SHIPPED = checkpoints.ROOT / "assets" / "workshops"
MAX_FILE = 200_000          # characters of a workshop file
MAX_STEPS = 100
MAX_TEXT = 5_000            # characters of a step's text, a hint, a question
MAX_ANSWER = 500            # characters of a student's answer (or input) the grader reads
KINDS = ("choice", "number", "text")
STEP_KEYS = {"title", "view", "text", "hints", "question"}
QUESTION_KEYS = {"id", "prompt", "kind", "choices", "answer", "tolerance", "words", "accept", "tool", "args",
                 "input", "example", "explain"}
TOP_KEYS = {"id", "title", "about", "steps"}
ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")


class WorkshopError(ValueError):
    """A workshop that does not load: `messages` lists every problem found, each naming its line and field."""

    def __init__(self, messages: list[str]):
        super().__init__("\n".join(messages))
        self.messages = messages


@dataclass(frozen=True)
class Question:
    prompt: str
    kind: str                                  # choice, number or text
    id: str = ""
    choices: tuple[str, ...] = ()
    answer: str = ""                           # a fixed answer (choice, number); "" for a tool's or a text's
    tolerance: float = 0.0
    words: tuple[str, ...] = ()                # number: words accepted as they are ('never')
    accept: tuple[str, ...] = ()               # text: the accepted answers
    tool: str = ""
    args: dict = field(default_factory=dict)
    input: str = ""                            # the label of the student's own input, when an argument is {input}
    example: str = ""                          # an input the loader computes the answer of, to prove it computes
    explain: str = ""                          # why, for a fixed answer


@dataclass(frozen=True)
class Step:
    title: str
    view: str                                  # the link's query string, "" to leave the view as it is
    text: str
    hints: tuple[str, ...] = ()
    question: Question | None = None


@dataclass(frozen=True)
class Workshop:
    id: str
    title: str
    about: str
    steps: tuple[Step, ...]


# Reading a file, with the line of every value


class _Loader(yaml.SafeLoader):
    """YAML's safe loader where only true and false are booleans: YAML 1.1 also reads yes, no, on and off as
    booleans, and a lecturer who accepts the answer `yes` means the word."""


_Loader.yaml_implicit_resolvers = {
    first: [r for r in resolvers if r[0] != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                              list("tTfF"))


def _lines_of(node, path: tuple, lines: dict) -> None:
    """The line (1-based) of every value in a composed YAML tree, by its path of keys and indexes."""
    lines.setdefault(path, node.start_mark.line + 1)      # a mapping's value: the line of its key, set below
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                lines[path + (key.value,)] = key.start_mark.line + 1
                _lines_of(value, path + (key.value,), lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _lines_of(item, path + (i,), lines)


def read(text: str, name: str = "workshop.yaml") -> tuple[object, dict]:
    """A file's data and the line of each path in it. JSON (a name ending in .json, or text starting with '{') is
    read by the json module; its lines come from the same YAML composer (JSON is YAML), so a key's line is found
    the same way. A file that is not well-formed raises WorkshopError with the line of the fault."""
    if not isinstance(text, str) or not text.strip():
        raise WorkshopError(["The workshop file is empty."])
    if len(text) > MAX_FILE:
        raise WorkshopError([f"The workshop file is {len(text):,} characters; at most {MAX_FILE:,} are read."])
    as_json = name.lower().endswith(".json") or text.lstrip().startswith("{")
    if as_json:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise WorkshopError([f"line {err.lineno}: not valid JSON: {err.msg}"]) from None
    lines: dict = {}
    try:
        node = yaml.compose(text, Loader=_Loader)
        if not as_json:
            data = yaml.load(text, Loader=_Loader)
        if node is not None:
            _lines_of(node, (), lines)
    except yaml.MarkedYAMLError as err:
        if as_json:
            return data, lines           # valid JSON the YAML composer refuses: no lines, the data stands
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}: " if mark else ""
        raise WorkshopError([f"{where}not valid YAML: {err.problem or err.context}"]) from None
    except yaml.YAMLError as err:
        raise WorkshopError([f"not valid YAML: {str(err)[:200]}"]) from None
    return data, lines


# Validation


class _Check:
    """Collects messages, each with the line of the path it is about (or of its nearest parent that has one)."""

    def __init__(self, lines: dict, models_required: bool = True):
        self.lines, self.messages, self.models_required = lines, [], models_required

    def say(self, path: tuple, message: str) -> None:
        where = path
        while where and where not in self.lines:
            where = where[:-1]
        line = self.lines.get(where)
        name = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "the file"
        self.messages.append(f"{f'line {line}, ' if line else ''}{name}: {message}")

    def text(self, data: dict, key: str, path: tuple, required: bool = False, limit: int = MAX_TEXT) -> str:
        if data.get(key) is None:
            if required:
                self.say(path, f"`{key}` is required")
            return ""
        value = self.one(data[key], path + (key,), limit)
        if required and not value.strip():
            self.say(path + (key,), "is empty")
        return value

    def one(self, value, path: tuple, limit: int) -> str:
        """A text value (a number is read as its digits), at most `limit` characters."""
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            self.say(path, f"should be text, not {type(value).__name__}")
            return ""
        value = str(value)
        if len(value) > limit:
            self.say(path, f"is {len(value):,} characters; at most {limit:,}")
            return value[:limit]
        return value

    def texts(self, data: dict, key: str, path: tuple, limit: int = MAX_TEXT) -> tuple[str, ...]:
        value = data.get(key)
        if value is None:
            return ()
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            self.say(path + (key,), f"should be a list of texts, not {type(value).__name__}")
            return ()
        return tuple(self.one(v, path + (key, i), limit) for i, v in enumerate(value))

    def unknown(self, data: dict, allowed: set, path: tuple) -> None:
        for key in data:
            if key not in allowed:
                self.say(path + (key,), f"unknown field {str(key)[:40]!r}; the fields are {', '.join(sorted(allowed))}")


def normalise(value) -> str:
    """An answer as it is compared: case folded, runs of spaces as one, no spaces at the ends."""
    return " ".join(str(value if value is not None else "").split()).casefold()


def _number(value) -> float | None:
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    return number if abs(number) < 1e15 else None


def _question(c: _Check, data, path: tuple) -> Question | None:
    if not isinstance(data, dict):
        c.say(path, "should be a mapping (prompt, kind, ...)")
        return None
    c.unknown(data, QUESTION_KEYS, path)
    prompt = c.text(data, "prompt", path, required=True, limit=1_000)
    kind = data.get("kind")
    if kind not in KINDS:
        c.say(path + ("kind",) if "kind" in data else path, f"`kind` should be one of {', '.join(KINDS)}")
        return None
    qid = c.text(data, "id", path, limit=40)
    if qid and not ID.match(qid):
        c.say(path + ("id",), "should be lower-case letters, digits and '-' (at most 40)")
    choices = c.texts(data, "choices", path, limit=200)
    words = tuple(normalise(w) for w in c.texts(data, "words", path, limit=40))
    accept = c.texts(data, "accept", path, limit=MAX_ANSWER)
    tool, args = data.get("tool"), data.get("args", {})
    answer, tolerance = data.get("answer"), data.get("tolerance", 0)
    if kind == "choice" and not 2 <= len(choices) <= 30:
        c.say(path + ("choices",) if "choices" in data else path, "a choice question needs 2 to 30 `choices`")
    if kind != "choice" and choices:
        c.say(path + ("choices",), f"only a choice question has choices, not a {kind} question")
    if kind != "number" and ("tolerance" in data or words):
        c.say(path + ("tolerance" if "tolerance" in data else "words",), "only a number question has this field")
    if kind != "text" and accept:
        c.say(path + ("accept",), "only a text question has accepted answers; give `answer`")
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance < 1e12:
        c.say(path + ("tolerance",), "should be a number ≥ 0")
        tolerance = 0
    if tool is not None:
        if answer is not None or accept:
            c.say(path + ("tool",), "a question has either a tool or a fixed answer, not both")
        missing = [] if c.models_required else tools.missing_models(tool, args)
        for where, message in tools.problems(tool, args):
            if (where, message) not in missing:
                c.say(path + tuple(where.split(".")), message)
    elif kind == "text":
        if answer is not None:
            c.say(path + ("answer",), "a text question lists its accepted answers in `accept`, not `answer`")
        if not accept:
            c.say(path, "a text question needs `accept` (the accepted answers) or a `tool`")
    elif answer is None:
        c.say(path, f"a {kind} question needs an `answer` or a `tool`")
    elif kind == "choice" and normalise(answer) not in {normalise(x) for x in choices}:
        c.say(path + ("answer",), f"{str(answer)[:40]!r} is not one of the choices")
    elif kind == "number" and _number(answer) is None and normalise(answer) not in words:
        c.say(path + ("answer",), f"should be a number (or one of `words`), not {str(answer)[:40]!r}")
    needs_input = tool is not None and isinstance(args, dict) and tools.uses_input(args)
    label = c.text(data, "input", path, limit=200)
    example = c.text(data, "example", path, limit=tools.MAX_INPUT)
    if needs_input and not (label.strip() and example.strip()):
        c.say(path, "a tool argument says {input}: give `input` (what the student types) and an `example` of it")
    if not needs_input and (label or example):
        c.say(path + ("input" if label else "example",), "no tool argument says {input}, so there is no input")
    return Question(prompt, kind, qid, choices, "" if answer is None else str(answer), float(tolerance), words,
                    accept, str(tool or ""), dict(args) if isinstance(args, dict) else {}, label, example,
                    c.text(data, "explain", path))


def _step(c: _Check, data, path: tuple, check_view: Callable[[dict], list[str]] | None) -> Step | None:
    if not isinstance(data, dict):
        c.say(path, "should be a mapping (view, text, hints, question)")
        return None
    c.unknown(data, STEP_KEYS, path)
    view = c.text(data, "view", path, limit=4_000)
    try:
        params = parse_view(view)
    except ValueError as err:
        c.say(path + ("view",), str(err))
        params = {}
    if check_view is not None and params:
        for problem in check_view(params):
            c.say(path + ("view",), problem)
    question = _question(c, data["question"], path + ("question",)) if "question" in data else None
    return Step(c.text(data, "title", path, limit=200), view, c.text(data, "text", path, required=True),
                c.texts(data, "hints", path), question)


def parse_view(view: str) -> dict[str, str]:
    """A step's view as the link's parameters: "tab=attention&att.layer=2", "?tab=...", or a whole link
    ("http://host/?tab=..."); "" is no change. Each key once."""
    view = (view or "").strip()
    if not view:
        return {}
    query = urlsplit(view).query if "?" in view else view
    pairs = parse_qsl(query, keep_blank_values=True)
    if not pairs:
        raise ValueError(f"{view[:60]!r} is not a link's query string (such as tab=attention&att.layer=2)")
    keys = [k for k, _ in pairs]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ValueError(f"the view gives {', '.join(twice)} more than once")
    return dict(pairs)


def validate(data, lines: dict | None = None, check_view: Callable[[dict], list[str]] | None = None,
             default_id: str = "workshop", models_required: bool = True) -> Workshop:
    """A Workshop from a file's data, or a WorkshopError listing every problem (line and field). `check_view`
    (the app's link parser, from the UI) returns what is wrong with a view's parameters. `models_required` False: a
    model the app lacks (a damaged checkpoint) is not a problem of the file (the app's own quiz, read as it starts)."""
    c = _Check(lines or {}, models_required)
    if not isinstance(data, dict):
        raise WorkshopError(["The workshop should be a mapping with `title` and `steps`."])
    c.unknown(data, TOP_KEYS, ())
    wid = c.text(data, "id", (), limit=40) or default_id
    if not ID.match(wid):
        c.say(("id",), "should be lower-case letters, digits and '-' (at most 40)")
    title, about = c.text(data, "title", (), required=True, limit=200), c.text(data, "about", ())
    raw = data.get("steps")
    if not isinstance(raw, list) or not raw:
        c.say(("steps",), "`steps` should be a list of at least one step")
        raw = []
    if len(raw) > MAX_STEPS:
        c.say(("steps",), f"{len(raw)} steps; at most {MAX_STEPS}")
    steps = [_step(c, s, ("steps", i), check_view) for i, s in enumerate(raw[:MAX_STEPS])]
    ids = [s.question.id for s in steps if s and s.question and s.question.id]
    for twice in sorted({i for i in ids if ids.count(i) > 1}):
        c.say(("steps",), f"the question id {twice!r} is used more than once")
    if c.messages:
        raise WorkshopError(c.messages)
    return Workshop(wid, title, about, tuple(steps))


def precompute(workshop: Workshop) -> list[str]:
    """Every tool question's answer computed now (on its `example` input where it takes one): the messages of those
    that cannot be, each naming its step. [] when all compute."""
    failed = []
    for i, step in enumerate(workshop.steps):
        q = step.question
        if q is not None and q.tool:
            try:
                tools.compute(q.tool, tools.with_input(q.args, q.example))
            except tools.ToolError as err:
                failed.append(f"steps[{i}].question.tool: {q.tool} cannot compute an answer: {err}")
    return failed


def load(text: str, name: str = "workshop.yaml", check_view: Callable[[dict], list[str]] | None = None,
         compute: bool = True, models_required: bool = True) -> Workshop:
    """Read, validate and (with `compute`) prove every tool answer computes: a Workshop, or a WorkshopError."""
    data, lines = read(text, name)
    default_id = re.sub(r"[^a-z0-9-]+", "-", Path(name).stem.lower()).strip("-")[:40] or "workshop"
    workshop = validate(data, lines, check_view, default_id, models_required)
    failed = precompute(workshop) if compute else []
    if failed:
        raise WorkshopError(failed)
    return workshop


def shipped_files() -> list[Path]:
    return sorted(SHIPPED.glob("*.yaml")) + sorted(SHIPPED.glob("*.json"))


def load_shipped(name: str, check_view: Callable[[dict], list[str]] | None = None, compute: bool = False,
                 models_required: bool = True) -> Workshop:
    """A shipped workshop by its file's stem (assets/workshops/<name>.yaml)."""
    path = next((p for p in shipped_files() if p.stem == name), None)
    if path is None:
        raise KeyError(name)
    return load(path.read_text(encoding="utf-8"), path.name, check_view, compute, models_required)


# Grading


def truth(q: Question, given_input: str = "") -> tuple[str, str]:
    """The right answer and why: the fixed one, or the tool's, computed now on the student's input."""
    if not q.tool:
        shown = q.answer or (q.accept[0] if q.accept else "")
        return shown, q.explain
    if tools.uses_input(q.args):
        given_input = str(given_input if given_input is not None else "")
        if not given_input.strip():
            raise ValueError(f"Type {q.input[:80] or 'your input'} first: the answer is computed on it.")
        if len(given_input) > tools.MAX_INPUT:
            raise ValueError(f"Your input is {len(given_input):,} characters; at most {tools.MAX_INPUT} are read.")
    try:
        return tools.compute(q.tool, tools.with_input(q.args, given_input))
    except tools.ToolError as err:
        raise ValueError(f"The answer could not be computed: {err}") from None


def given(q: Question, answer) -> str:
    """A student's answer as it is compared (normalised), or a ValueError saying what it should be."""
    raw = str(answer if answer is not None else "")
    if len(raw) > MAX_ANSWER:
        raise ValueError(f"Your answer is {len(raw):,} characters long; an answer is at most {MAX_ANSWER}.")
    text = normalise(raw)
    if not text:
        raise ValueError("Your answer is empty: type it (or pick a choice) first.")
    if q.kind == "choice" and text not in {normalise(c) for c in q.choices}:
        raise ValueError(f"Your answer should be one of: {', '.join(q.choices)}.")
    if q.kind == "number" and text not in q.words:
        number = _number(text)
        if number is None or number != number:
            also = f" (or {', '.join(q.words)})" if q.words else ""
            raise ValueError(f"Your answer should be a number{also}, e.g. 4.")
        text = str(int(number)) if number == int(number) else str(number)
    return text


def correct(q: Question, answer: str, right: str) -> bool:
    """Whether the normalised answer is right: a number within the tolerance, a word or a text as it is (a text
    question also takes any of its accepted answers)."""
    if q.kind == "number" and answer not in q.words:
        target = _number(right)
        return target is not None and abs(float(answer) - target) <= q.tolerance + 1e-9 * max(1.0, abs(target))
    return answer == normalise(right) or (q.kind == "text" and answer in {normalise(a) for a in q.accept})


def grade(q: Question, answer, given_input: str = "") -> dict:
    """Whether `answer` is right, with the right answer and why (a tool's computed now, on `given_input`). A
    ValueError with a message a student can act on for an answer that cannot be read."""
    mine = given(q, answer)
    right, why = truth(q, given_input)
    return {"given": mine, "correct": correct(q, mine, right), "answer": right, "why": why,
            "computed": bool(q.tool), "accepted": list(q.accept) if q.kind == "text" and not q.tool else []}


def as_json(workshop: Workshop) -> dict:
    """A workshop as the API returns it: the steps, their views and questions, never a fixed answer (a student
    asks `workshop_check` for the verdict)."""
    def question(q: Question | None) -> dict | None:
        if q is None:
            return None
        return {"id": q.id, "prompt": q.prompt, "kind": q.kind, "choices": list(q.choices), "words": list(q.words),
                "computed": bool(q.tool), "tool": q.tool or None, "input": q.input or None}
    return {"id": workshop.id, "title": workshop.title, "about": workshop.about, "n_steps": len(workshop.steps),
            "steps": [{"title": s.title, "view": s.view, "text": s.text, "hints": list(s.hints),
                       "question": question(s.question)} for s in workshop.steps]}
