"""A workshop written in the app: the lecturer's form adds steps to a draft, a YAML text the lecturer can also edit.

The draft is the file itself (docs/workshops.md's schema), so what the lecturer downloads is what a colleague
imports, and the loader's messages (line and field) point into the text the lecturer sees. A step comes from the form
(the current view's query string, its text, hints, a question); each added step is validated with the rest of the
draft before it is kept. Plain data: no gradio here.
"""

from __future__ import annotations

import yaml

from playground.analysis import workshops as w

START = "title: My workshop\nsteps: []\n"


def _list(text: str) -> list[str]:
    """Hints, choices or accepted answers as the form takes them: one a line (or comma-separated on one line)."""
    text = str(text or "")
    items = text.splitlines() if "\n" in text.strip() else text.split(",")
    return [item.strip() for item in items if item.strip()]


def question(kind: str, prompt: str, choices: str = "", answer: str = "", tolerance: float = 0.0, tool: str = "",
             args: str = "", input_label: str = "", example: str = "", explain: str = "") -> dict | None:
    """A question in the file's schema from the form's fields (None without a prompt). `args` is a YAML mapping
    (`{tokenizer: bpe, text: "{input}"}`); a WorkshopError names what cannot be read."""
    if not str(prompt or "").strip():
        return None
    q: dict = {"prompt": prompt.strip(), "kind": kind}
    if kind == "choice":
        q["choices"] = _list(choices)
    if tool:
        q["tool"] = tool
        try:
            parsed = yaml.safe_load(args) if str(args or "").strip() else {}
        except yaml.YAMLError:
            raise w.WorkshopError([f"The tool's arguments should be a mapping such as {{text: \"{{input}}\"}}, "
                                   f"not {str(args)[:60]!r}."]) from None
        q["args"] = parsed
        if input_label.strip():
            q["input"], q["example"] = input_label.strip(), example.strip()
    elif kind == "text":
        q["accept"] = _list(answer)
    elif str(answer or "").strip():
        q["answer"] = answer.strip()
    if kind == "number" and tolerance:
        q["tolerance"] = float(tolerance)
    if str(explain or "").strip():
        q["explain"] = explain.strip()
    return q


def add_step(draft: str, view: str, text: str, title: str = "", hints: str = "", ask: dict | None = None,
             workshop_title: str = "") -> str:
    """The draft with one more step (the view's query string as the page has it), as YAML text. The new draft is
    validated (views and tools checked later, at download or walk); a WorkshopError lists what is wrong."""
    data, _ = w.read(draft or START)
    if not isinstance(data, dict):
        raise w.WorkshopError(["The draft should be a mapping with `title` and `steps`."])
    steps = data.get("steps") or []
    if not isinstance(steps, list):
        raise w.WorkshopError(["The draft's `steps` should be a list."])
    step: dict = {}
    if title.strip():
        step["title"] = title.strip()
    step["view"] = view.lstrip("?")
    step["text"] = text.strip()
    if _list(hints):
        step["hints"] = _list(hints)
    if ask:
        step["question"] = ask
    new = {**data, "title": workshop_title.strip() or data.get("title") or "My workshop", "steps": [*steps, step]}
    dumped = yaml.safe_dump(new, allow_unicode=True, sort_keys=False, width=110)
    w.load(dumped, "draft.yaml", compute=False)        # every message names a line of the text the lecturer sees
    return dumped
