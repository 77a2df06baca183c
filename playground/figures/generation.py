"""Figures of the Generation tab: the text as it is generated, one step's next-token distribution, causal
attention."""

from __future__ import annotations

import html
import json

import plotly.graph_objects as go

from playground.figures.common import ACCENT, layout, row_labels, scrolls, token_label

# ---------------------------------------------------------------------------------------------
# Generation: the text as it is generated, one step's next-token distribution, causal attention

# A click on a token, or by keyboard: the text is one stop of the tab order (not 200), and Left/Right (Home/End)
# choose the previous/next (first/last) token, as a click does; the chosen token's own description (its title: step,
# token, probability, entropy) is read out through the live region.
GEN_CLICK_JS = """
if (element.dataset.chooses) return;  // Gradio may run this again for the same element: one set of listeners
element.dataset.chooses = 'yes';
element.tabIndex = 0;
element.setAttribute('role', 'group');
element.setAttribute('aria-label', 'Generated text. Left and Right arrow keys choose a token and show its step.');
const said = document.getElementById('gen-said') || document.body.appendChild(Object.assign(
  document.createElement('span'), {id: 'gen-said', className: 'sr-only'}));
said.setAttribute('aria-live', 'polite');
let pending = null;
const choose = (tok, wait = 0) => {  // by keys: the step is asked for once the keys rest (one question, not ten)
  element.querySelectorAll('.gen-tok.sel').forEach((el) => el.classList.remove('sel'));
  tok.classList.add('sel');
  said.textContent = tok.title;
  clearTimeout(pending);
  pending = setTimeout(() => trigger('click', {step: +tok.dataset.step}), wait);
};
element.addEventListener('click', (event) => {
  const tok = event.target.closest('.gen-tok');
  if (tok) choose(tok);
});
element.addEventListener('keydown', (event) => {
  const toks = [...element.querySelectorAll('.gen-tok')];
  const moves = {ArrowLeft: -1, ArrowRight: 1, Home: -toks.length, End: toks.length};
  if (!(event.key in moves) || !toks.length) return;
  event.preventDefault();
  const at = toks.findIndex((el) => el.classList.contains('sel'));
  const from = at < 0 ? (moves[event.key] > 0 ? -1 : toks.length) : at;
  choose(toks[Math.max(0, Math.min(toks.length - 1, from + moves[event.key]))], 250);
});
"""


# Out of date: every view carries the inputs it was computed from (`data-inputs`); on any change of the tab's inputs,
# and whenever a view is redrawn, the page compares them with the inputs' current values, in the browser, and dims a
# view whose inputs changed under a note that names them. A new result carries the current inputs, so the mark goes.
# Called as a Gradio js-only event with the inputs in this order (generation_tab's `stale_inputs`). The step chart
# shows a step of the main text, so it is dimmed with it.
STALE_JS = """
(prompt, model, max_new_tokens, strategy, temperature, top_k, top_p, seed, beam_width, chat, model_a, model_b) => {
  const now = {prompt, model, max_new_tokens, strategy, temperature, top_k, top_p, seed, beam_width, chat,
               model_a, model_b};
  const names = {prompt: 'the prompt', model: 'the model', max_new_tokens: 'the number of new tokens',
                 strategy: 'the strategy', temperature: 'the temperature', top_k: 'top-k', top_p: 'top-p',
                 seed: 'the seed', beam_width: 'the beam width', chat: 'chat', model_a: 'model A', model_b: 'model B'};
  // a number may come back from the server as 10.0 where the slider says 10
  const same = (a, b) => (typeof a === 'number' || typeof b === 'number') ? Number(a) === Number(b)
                                                                             : String(a) === String(b);
  document.querySelectorAll('#gen-text [data-inputs], #gen-compare-a [data-inputs], #gen-compare-b [data-inputs]')
    .forEach((view) => {
      let was;
      try { was = JSON.parse(view.dataset.inputs); } catch (e) { return; }
      const changed = Object.keys(was).filter((k) => !same(was[k], now[k])).map((k) => names[k] || k);
      let note = view.parentElement.querySelector(':scope > .gen-stale');
      view.classList.toggle('stale', changed.length > 0);
      view.style.opacity = changed.length ? '0.45' : '';
      if (!changed.length) { if (note) note.remove(); return; }
      if (!note) {
        note = document.createElement('div');
        note.className = 'notice gen-stale';
        view.before(note);
      }
      const list = changed.length > 1 ? changed.slice(0, -1).join(', ') + ' and ' + changed.at(-1) : changed[0];
      note.textContent = `Out of date: ${list} changed since this was computed; press ${view.dataset.rerun}.`;
    });
  const text = document.querySelector('#gen-text [data-inputs]'), chart = document.getElementById('gen-chart');
  if (chart) chart.style.opacity = text && text.classList.contains('stale') ? '0.45' : '';  // kept across redraws
  return [];
}
"""


def generated_html(prompt: str, steps: list[dict], selected: int | None = None, notices: list[str] = (),
                   title: str = "", running: bool = False, inputs: dict | None = None, rerun: str = "Generate",
                   caveat: str = "") -> str:
    """The prompt (grey) then each generated token, shaded by the probability it was drawn with;
    a click on a token selects its step (GEN_CLICK_JS). `inputs`: the tab's inputs this text was computed from,
    by STALE_JS's names, so the page can mark it out of date when one changes (and `rerun` names the button).
    `caveat`: a line under the text (what a reader should not take the text for)."""
    parts = [f'<div class="notice">{html.escape(n)}</div>' for n in notices]
    if title:
        parts.append(f'<div class="gen-title">{html.escape(title)}</div>')
    tokens = []
    for i, s in enumerate(steps):
        alpha = 0.12 + 0.5 * (1.0 - s["prob"])  # darker = a less likely choice
        what = repr(token_label(s["token"])) if s["token"] or "bytes" not in s else (
            f"bytes {s['bytes']} (part of a character)")  # a byte-level token that leaves a character unfinished
        tip = html.escape(f"step {i + 1}: {what}, p = {s['prob']:.3f}, entropy {s['entropy']:.2f} nats", quote=True)
        sel = " sel" if selected == i else ""
        sel += " nl" if "\n" in s["token"] and not s["token"].strip() else ""   # a mark to see and click (CSS)
        tokens.append(f'<span class="gen-tok{sel}" data-step="{i}" style="background: rgba(217, 83, 79, {alpha:.2f})" '
                      f'title="{tip}">{html.escape(s["token"])}</span>')  # plain text: spaces and line breaks as such
    cursor = '<span class="gen-cursor">▍</span>' if running else ""
    state = "" if inputs is None else (f' data-inputs="{html.escape(json.dumps(inputs), quote=True)}" '
                                       f'data-rerun="{html.escape(rerun, quote=True)}"')
    parts.append(f'<div class="gen-text"{state}><span class="gen-prompt">{html.escape(prompt)}</span>'
                 f'{"".join(tokens)}{cursor}</div>')
    if caveat:
        parts.append(f'<p class="gen-caveat">{html.escape(caveat)}</p>')
    return "".join(parts)


def next_token_figure(step: dict, index: int, cutoffs: tuple[str, ...] = ("top-k", "top-p")) -> go.Figure:
    """One step's proposed distribution over its most probable tokens, ranked; the tokens top-k and
    top-p keep in blue, the cut ones grey, the chosen token red, the two cut-offs as dashed lines."""
    labels = [f"{rank + 1}. {token_label(tok)!r}" for rank, (tok, _) in enumerate(step["top"])]
    probs = [p for _, p in step["top"]]
    kept = min(step["n_top_k"], step["n_top_p"])
    chosen = step["rank"] - 1  # by rank, not by string: two byte tokens can both read '�'
    colors = [ACCENT if rank == chosen else ("#4a7bd0" if rank < kept else "#c8c8c8")
              for rank in range(len(step["top"]))]
    fig = go.Figure(go.Bar(x=labels, y=probs, marker_color=colors, hovertemplate="%{x}: p = %{y:.4f}<extra></extra>"))
    shapes, notes = [], []
    for n, name, dash in ((step["n_top_k"], "top-k", "dash"), (step["n_top_p"], "top-p", "dot")):
        if name in cutoffs and n < len(labels):
            shapes.append(dict(type="line", x0=n - 0.5, x1=n - 0.5, y0=0, y1=1, yref="paper",
                               line=dict(color="#333", dash=dash, width=2)))
            notes.append(dict(x=n - 0.5, y=1, yref="paper", text=f"{name} cut ({n} kept)", showarrow=False,
                              xanchor="left", yanchor="bottom" if name == "top-k" else "top", font=dict(size=12)))
    beyond = [f"{name} keeps {n}" for n, name in ((step["n_top_k"], "top-k"), (step["n_top_p"], "top-p"))
              if name in cutoffs and n >= len(labels)]
    if step["token"] or "bytes" not in step:
        what = repr(token_label(step["token"]))
    else:  # a byte-level token that leaves a character unfinished adds no text yet
        what = f"the byte(s) {step['bytes']} (part of a character the next token(s) complete)"
    title = (f"Step {index + 1}: chose {what} (p = {step['prob']:.3f}, rank {step['rank']}); "
             f"entropy {step['entropy']:.2f} nats" + (f"; {', '.join(beyond)}" if beyond else ""))
    if "sees" in step:  # an n-gram: what it read, and whether it had to back off
        n, order = step["n"], step["order"]
        how = "its whole context was counted" if order == n else (
            f"backed off to {order}-grams" if order else "nothing counted: uniform")
        title += f"<br>the {n}-gram sees {token_label(step['sees'])!r}: {how}"
    return go.Figure(fig.data, layout=layout(
        title=dict(text=title, font=dict(size=14)), height=360, shapes=shapes, annotations=notes,
        yaxis=dict(title=dict(text="probability"), rangemode="tozero"), xaxis=dict(tickangle=-45),
        margin=dict(l=10, r=10, t=60, b=90), bargap=0.15,
    ))


def causal_attention_figure(tokens: list[str], attention: list[list[float]], title: str) -> go.Figure:
    """A T x T attention map: row = the query token, column = the key token it attends to; the
    upper triangle is exactly zero (a token cannot look ahead)."""
    labels = [f"{i}:{token_label(t)}" for i, t in enumerate(tokens)]
    fig = go.Figure(go.Heatmap(z=attention, x=labels, y=labels, colorscale="Blues", zmin=0, zmax=1,
                               hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>"))
    side = min(900, 220 + 14 * len(tokens))
    below = 40 + 0.6 * 12 * min(max(map(len, labels), default=1), 24)  # the keys' labels, upright, and their title
    rows = row_labels(len(labels), side - 110 - below)                  # every query labelled while a row holds it
    return go.Figure(fig.data, layout=layout(
        title=dict(text=title, font=dict(size=14)), height=side, width=side + 80,
        yaxis=dict(autorange="reversed", title=dict(text="query (generating)"), **rows),
        xaxis=dict(title=dict(text="key (attended to)"), tickangle=-90, tickfont=rows["tickfont"]),
    ))


def logit_lens_figure(data: dict, title: str) -> go.Figure:
    """Layers (rows, the embedding at the bottom) × positions (columns, the input token under each): each cell the
    token that layer would predict next and its probability (colour)."""
    n_layers, tokens = len(data["layers"]), data["tokens"]
    x = [f"{i}: {token_label(t)}" for i, t in enumerate(tokens)]
    text = [[token_label(t) for t in row] for row in data["top_token"]]
    fig = go.Figure(go.Heatmap(
        z=data["top_prob"], x=x, y=data["layers"], text=text, texttemplate="%{text}" if len(tokens) <= 24 else None,
        colorscale="Blues", zmin=0, zmax=1, colorbar=dict(title=dict(text="p"), thickness=12),
        customdata=data["final_token_prob"],
        hovertemplate="%{y}, after %{x}: predicts %{text} (p = %{z:.3f}); the last layer's choice: p = "
                      "%{customdata:.3f}<extra></extra>"))
    fig.update_layout(**layout(title=dict(text=title), height=max(320, 22 * n_layers + 160),
                               margin=dict(l=10, r=10, t=50, b=90)))
    fig.update_xaxes(title_text="position (input token)", tickangle=-60)
    fig.update_yaxes(title_text="residual stream after")
    return fig


# ---------------------------------------------------------------------------------------------
# SmolLM2's card: where its weights come from, and how far the 4-bit file is from the original


def smollm2_card_markdown(card: dict, shape: tuple[int, int, int], reason: str, bits: int) -> str:
    """The model's card as it is known before any measurement: its source, its shape, whether the Q4_1 gap can be
    measured here (`reason` says why not), the bits of a weight in the twin that serves its answers."""
    layers, heads, kv = shape
    lines = [f"**Weights:** {html.escape(str(card.get('source', '?')))}",
             f"**Shape:** {layers} layers × {heads} query heads sharing {kv} key/value heads "
             "(grouped-query attention)."]
    if "n_params" in card:
        lines.append(f"**Parameters:** {card['n_params']:,}; loaded in {card.get('load_seconds', '?')} s.")
    lines.append("**The 4-bit file against the original:** " + (html.escape(reason) if reason else
                 "both are here: *Measure the gap* loads each in fp32 (about 1 GB for the time it takes) and "
                 "compares them on the held-out text."))
    lines.append("**How its answers are served:** a class's generations decode together, one step for every "
                 f"student at once, on a twin of the model in integer arithmetic (weights in {bits} bits per channel, "
                 "each row's activations in 14 bits at its own scale), so that a seeded answer is the same alone "
                 "or beside any others. Attention, the logit lens and the Causal lab read the model itself. "
                 "*Measure the engine's cost* compares the two now.")
    return "\n\n".join(lines)


def engine_cost_markdown(result: dict) -> str:
    """The serving engine's cost against the model itself (serving/engine.cost), with its date and protocol."""
    return (f"**Measured {result['date']}** in {result['seconds']} s, {result['weights']}. Next-token "
            f"distributions on "
            f"{result['text_tokens']} tokens: mean KL {result['kl']:.3g} nats, top-1 agreement "
            f"{result['top1_agreement']:.2%}, largest logit difference {result['max_logit_diff']:.3f}. Greedy answers: "
            f"{result['identical_answers']} of {result['questions']} identical "
            f"({result['tokens_before_a_difference']:.1%} of the tokens before a first difference).\n\n"
            f"*Protocol:* {html.escape(result['protocol'])}.")


def quant_gap_markdown(result: dict) -> str:
    """A quant-gap measurement (analysis/quant_gap.py) as a table, with its date, sources, text and protocol."""
    rows = [f"| {name} | {result[f'loss_{key}']:.4f} | {result[f'perplexity_{key}']:.3f} |"
            for name, key in ((f"original: {result['original']}", "original"), (f"4-bit: {result['other']}", "other"))]
    return (f"**Measured {result['date']}** on {', '.join(result['text'])} ({result['tokens']:,} predicted tokens in "
            f"{result['windows']} windows of at most {result['block']}), in {result['seconds']} s.\n\n"
            "| model | held-out loss (nats/token) | perplexity |\n|---|---|---|\n"
            + "\n".join(html.escape(r) for r in rows)
            + f"\n\nLoss increase {result['loss_increase']:+.4f} nats/token; mean KL(original ‖ 4-bit) "
            f"{result['kl']:.4g} nats per position; top-1 agreement {result['top1_agreement']:.2%}; largest logit "
            f"difference {result['max_logit_diff']:.3f}.\n\n*Protocol:* {html.escape(result['protocol'])}.")
# Chain of thought and tool calling with SmolLM2 (analysis/reasoning.py, analysis/tool_calling.py)

WAY_TITLES = {"direct": "Directly", "step_by_step": "Step by step"}


def way_html(data: dict, way: str) -> str:
    """One way's answer: a verdict line (the extracted answer, right or wrong when the answer is known), then the
    reply token by token, each shaded by its probability (hover: p and entropy)."""
    got = data[way]
    verdict = f"answer: {got['answer'] if got['answer'] is not None else 'no number'}"
    if got.get("correct") is not None:
        verdict += f" · {'correct' if got['correct'] else 'wrong'} (expected {data['expected']})"
    verdict += f" · {got['n_tokens']} tokens" + ("" if got.get("stopped") else " (stopped at the token budget)")
    title = f"{WAY_TITLES[way]}: {verdict}"
    prompt = data.get("prompts", {}).get(way, "")   # the user's turn; the reply starts on a line of its own, as the
    return generated_html(prompt and prompt + "\n", got["steps"], title=title)   # chat template has it


def measured_html(results: dict | None) -> str:
    """The accuracy the evaluation script measured, as a table with its count and protocol (its own text)."""
    if not results:
        return ("<p><i>Not measured yet: run <code>python -m playground.tools.chain_of_thought</code> to measure "
                "both ways on the shipped word problems.</i></p>")
    n = results["n"]
    rows = "".join(f"<tr><th scope=\"row\">{WAY_TITLES[way]}</th><td>{results['correct'][way]} of {n}</td>"
                   f"<td>{100 * results['accuracy'][way]:.1f}%</td></tr>" for way in WAY_TITLES)
    return (f'<div class="emb-table" {scrolls("Chain of thought: accuracy")}><table>'
            f'<caption>{html.escape(results["model"])} on {n} word problems '
            f"({html.escape(results['decoding'])} decoding)</caption><tr><th>way</th><th>correct</th>"
            f"<th>accuracy</th></tr>{rows}</table></div>{_how_measured(results, 'Protocol: ', 'problems')}")


def _how_measured(results: dict, lead: str, items: str) -> str:
    """An evaluation's protocol, whether its run was whole, its command and time, as a paragraph."""
    partial = "" if results.get("complete", True) else (f" The run was interrupted: these are the first "
                                                        f"{results['n']} of the set's {results.get('set_size', '?')} "
                                                        f"{items}.")
    return (f"<p>{lead}{html.escape(results['protocol'])}{html.escape(partial)} Measured by "
            f"<code>{html.escape(results['command'])}</code> in {results['seconds']:,.0f} s.</p>")


TOOL_COUNTS = {"parses": "the first call is well-formed", "right_tool": "… and calls the question's tool",
               "right_result": "… with arguments that give the right result",
               "answered": "the answer in words is right"}


def tool_measured_html(results: dict | None) -> str:
    """How often the loop's calls were right, as the evaluation script measured them: a table with its count and
    protocol (its own text)."""
    if not results:
        return ("<p><i>Not measured yet: run <code>python -m playground.tools.tool_calls</code> to measure the calls "
                "on the shipped questions.</i></p>")
    n = results["n"]
    rows = "".join(f"<tr><th scope=\"row\">{html.escape(title)}</th><td>{results['counts'][key]} of {n}</td></tr>"
                   for key, title in TOOL_COUNTS.items())
    return (f'<div class="emb-table" {scrolls("Tool calling: how often the calls were right")}><table>'
            f'<caption>{html.escape(results["model"])} on {n} questions, five per tool '
            f"({html.escape(results['decoding'])} decoding, the call forced)</caption><tr><th>count</th>"
            f"<th>questions</th></tr>{rows}</table></div>{_how_measured(results, '', 'questions')}")


def tool_turns_html(data: dict) -> str:
    """The agent loop, turn by turn: the model's reply token by token, then what was parsed from it (the calls as
    JSON, or the parse error), what our tools returned, and the message that went back to the model."""
    parts = [f'<div class="notice">{html.escape(n)}</div>' for n in data.get("notices", [])]
    for turn in data["turns"]:
        parts.append(generated_html(turn.get("forced", ""), turn["steps"], title=f"Model turn {turn['turn']} "
                                                             f"({turn['prompt_tokens']} tokens of context)"))
        if turn["parse_error"]:
            parts.append(f'<div class="notice">Malformed tool call: {html.escape(turn["parse_error"])}</div>')
        elif turn["tool_calls"]:
            calls = json.dumps(turn["tool_calls"], indent=1, ensure_ascii=False)
            parts.append(f"<div>Tool call, parsed:</div><pre>{html.escape(calls)}</pre>")
            for r in turn["results"]:
                shown = f"error: {r['error']}" if "error" in r else f"result: {json.dumps(r['result'])}"
                parts.append(f"<div>{html.escape(r['name'])} → {html.escape(shown)}</div>")
        if turn["tool_message"]:
            parts.append(f"<div>Sent back to the model as a user turn:</div>"
                         f"<pre>{html.escape(turn['tool_message'])}</pre>")
    parts.append(f'<div class="gen-title">{html.escape(_tool_ending(data))}</div>')
    return "".join(parts)


def _tool_ending(data: dict) -> str:
    """How the loop ended, in words: the answer, or why there is none (an echo of the tool's turn is no answer)."""
    if data["stopped"] == "answer":
        return f"Answer: {data['answer']}"
    if data["stopped"] == "echo":
        return ("The model did not answer in words: its last reply repeats the tool's response instead (the "
                "tool's result is above).")
    return "No answer in words: the loop stopped at its turn limit."
