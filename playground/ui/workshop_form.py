"""The lecturer's form: write a workshop in the app, a step at a time, and download it as a file.

*Add a step from the current view* takes the page's address (the view a link would restore: view.js keeps it up to
date) with the step's text, hints and question, and appends it to the draft, a YAML text the lecturer may also edit
by hand (analysis/workshop_drafts.py). *Check and download* validates the draft as an import would (views with the
link parser, every tool answer computed) and offers the file; *Walk this draft* opens it in the panel above
(ui/workshop_tab.py wires both). Nothing here is stored on the server: the draft lives in the page.
"""

from __future__ import annotations

import html
import tempfile

import gradio as gr

from playground.analysis import workshop_drafts as drafts
from playground.analysis import workshop_tools
from playground.analysis import workshops as w
from playground.ui.common import downloads_dir

KINDS = ["none", "choice", "number", "text"]
CURRENT_VIEW_JS = "(...values) => [...values.slice(0, -1), window.location.search]"   # the last input: the view


def layout() -> dict:
    """The form's components, in an accordion of the workshop panel."""
    with gr.Accordion("Lecturer: write a workshop", open=False, elem_id="workshop-form"):
        gr.Markdown("Set up a view in any tab, then describe it here and *Add a step from the current view*. The "
                    "draft below is the file itself: edit it freely, then *Check and download* (docs/workshops.md).")
        title = gr.Textbox("", label="Workshop title", elem_id="form-title")
        with gr.Row():
            step_title = gr.Textbox("", label="Step title (optional)", elem_id="form-step-title")
            kind = gr.Radio(KINDS, value="none", label="Question", elem_id="form-kind")
        text = gr.Textbox("", label="What to look at (the step's text)", lines=2, elem_id="form-text")
        hints = gr.Textbox("", label="Hints (one a line)", lines=2, elem_id="form-hints")
        prompt = gr.Textbox("", label="The question", elem_id="form-prompt")
        with gr.Row():
            choices = gr.Textbox("", label="Choices (comma-separated)", elem_id="form-choices")
            answer = gr.Textbox("", label="Answer (a text question: the accepted answers, one a line)",
                                elem_id="form-answer")
            tolerance = gr.Number(0, label="Tolerance (a number question)", minimum=0, elem_id="form-tolerance")
        with gr.Row():
            tool = gr.Dropdown([("none: the answer above", ""), *[(t, t) for t in workshop_tools.TOOLS]], value="",
                               label="Or the app computes the answer with a tool", elem_id="form-tool")
            args = gr.Textbox("", label="The tool's arguments (YAML), e.g. {tokenizer: bpe, text: \"{input}\"}",
                              elem_id="form-args")
        with gr.Row():
            own = gr.Textbox("", label="The student's input box (where an argument says {input})",
                             elem_id="form-input")
            example = gr.Textbox("", label="An example of that input", elem_id="form-example")
        add = gr.Button("Add a step from the current view", variant="primary", elem_id="form-add")
        # a plain text box, not gr.Code: its syntax colours fall below WCAG's contrast (2:1 to 2.8:1, axe-core)
        draft = gr.Textbox(drafts.START, label="The workshop (YAML)", lines=10, max_lines=40, elem_id="form-draft")
        with gr.Row():
            download = gr.Button("Check and download", elem_id="form-download")
            walk = gr.Button("Walk this draft", elem_id="form-walk")
        message = gr.Markdown(elem_id="form-message")
        file = gr.File(label="The workshop file", interactive=False, elem_id="form-file")
        current = gr.Textbox("", visible="hidden", elem_id="form-view")     # mounted: the page's address goes here
    return dict(title=title, step_title=step_title, kind=kind, text=text, hints=hints, prompt=prompt, choices=choices,
                answer=answer, tolerance=tolerance, tool=tool, args=args, own=own, example=example, add=add,
                draft=draft, download=download, walk=walk, message=message, file=file, current=current)


def _refuse(err: w.WorkshopError) -> gr.Error:
    shown = "; ".join(html.escape(m, quote=False) for m in err.messages[:6])
    return gr.Error(f"Not added: {shown}")


def add_step(draft, title, step_title, text, hints, kind, prompt, choices, answer, tolerance, tool, args, own, example,
             current):
    """The draft with the form's step added (the current view), or a message saying what is wrong with it."""
    if not str(text or "").strip():
        raise gr.Error("Write the step's text first: what should the students look at in this view?")
    if kind != "none" and not str(prompt or "").strip():
        raise gr.Error("Write the question, or set Question to none.")
    try:
        ask = None if kind == "none" else drafts.question(kind, prompt, choices, answer, tolerance or 0, tool or "",
                                                           args, own, example)
        new = drafts.add_step(str(draft or ""), str(current or ""), text, step_title or "", hints or "", ask,
                              title or "")
    except w.WorkshopError as err:
        raise _refuse(err) from None
    n = len((w.read(new)[0] or {}).get("steps", []))
    return new, f"Step {n} added (its view: `{html.escape(str(current or '').lstrip('?')[:200]) or 'unchanged'}`)."


def check_and_download(draft, check_view):
    """The draft checked as an import would be; the file to download, or every message (line and field)."""
    try:
        workshop = w.load(str(draft or ""), "draft.yaml", check_view, compute=True)
    except w.WorkshopError as err:
        shown = "\n".join(f"- {html.escape(m, quote=False)}" for m in err.messages[:12])
        return gr.update(value=None), f"**The draft does not load yet:**\n{shown}"
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix=f"workshop-{workshop.id}-", dir=downloads_dir(),
                                     delete=False, encoding="utf-8") as f:
        f.write(str(draft))
    return f.name, (f"**{html.escape(workshop.title)}**: {len(workshop.steps)} steps, every view and tool answer "
                    "checked. Download the file below; students import it in the panel above.")


def wire(c: dict, walk_outputs: list, walk_draft, check_view):
    """The form's events; `walk_draft(draft, restored)` opens the draft in the panel (ui/workshop_tab.py), whose
    event is returned (the panel follows it as it follows its own: the selected word, the sub-tab)."""
    hidden = dict(api_visibility="private")
    fields = [c[k] for k in ("draft", "title", "step_title", "text", "hints", "kind", "prompt", "choices", "answer",
                             "tolerance", "tool", "args", "own", "example", "current")]
    c["add"].click(add_step, fields, [c["draft"], c["message"]], js=CURRENT_VIEW_JS, **hidden)
    c["download"].click(lambda d: check_and_download(d, check_view), c["draft"], [c["file"], c["message"]], **hidden)
    return c["walk"].click(walk_draft, [c["draft"], c["restored"]], walk_outputs, **hidden)
