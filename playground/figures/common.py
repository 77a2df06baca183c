"""Figure builders: arrays and labels in, plotly figures or HTML out. No torch, no gradio.

HTML is built with every piece of user text escaped; the CSS classes live in assets/style.css.
"""

from __future__ import annotations

import html
import unicodedata

import plotly.graph_objects as go

# Eight pale, distinguishable backgrounds (readable on a projector in light mode), cycled per token
PALETTE_SIZE = 8
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"  # no web font: nothing is fetched
ACCENT, MUTED = "#d9534f", "#9db4dc"


def layout(**overrides) -> dict:
    """A plain white layout. Not a plotly template: copying and serialising a template costs
    ~20 ms per figure, most of a request's budget."""
    base = dict(
        font=dict(family=FONT, size=14), paper_bgcolor="white", plot_bgcolor="white",
        margin=dict(l=10, r=10, t=50, b=40),
        xaxis=dict(gridcolor="#e5e5e5", zerolinecolor="#cccccc"), yaxis=dict(gridcolor="#e5e5e5"),
    )
    for key, value in overrides.items():
        base[key] = {**base[key], **value} if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return base


# ---------------------------------------------------------------------------------------------
# Making invisible characters visible


def visible(text: str) -> str:
    """Escape `text` for HTML and make whitespace and control characters visible: · for a space,
    → for a tab, ↵ (then a real line break) for a newline, \\x07 for a control character, the name
    of any other space (NBSP, U+2009, ...)."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch == " ":
            out.append('<span class="ws">·</span>')
        elif ch == "\n":
            out.append('<span class="ws">↵</span><br>')
        elif ch == "\t":
            out.append('<span class="ws">→</span>')
        elif code < 0x20 or 0x7F <= code <= 0x9F:
            out.append(f'<span class="ws">\\x{code:02x}</span>')  # as Python writes it; fonts lack ␇ and kin
        elif unicodedata.category(ch) == "Zs":
            out.append(f'<span class="ws">{html.escape(_codepoint(ch))}</span>')
        else:
            out.append(html.escape(ch))
    rendered = "".join(out)
    if text and all(unicodedata.category(ch) in ("Cf", "Mn", "Me") for ch in text):
        # a joiner or a combining accent alone is invisible: name it, or put it on a dotted circle
        if all(unicodedata.category(ch) == "Cf" for ch in text):
            return f'<span class="ws">{html.escape(" ".join(_codepoint(ch) for ch in text))}</span>'
        return "◌" + rendered
    return rendered


def _codepoint(ch: str) -> str:
    names = {"\u200d": "ZWJ", "\u200c": "ZWNJ", "\u200e": "LRM", "\u200f": "RLM", "\ufeff": "BOM", "\u00a0": "NBSP"}
    return names.get(ch, f"U+{ord(ch):04X}")


def token_label(token: str) -> str:
    """A token as text for tables and tooltips: whitespace and controls spelled out."""
    return "".join(
        {" ": "·", "\n": "↵", "\t": "→"}.get(ch, f"\\x{ord(ch):02x}" if ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F else ch)
        for ch in token
    )


# ---------------------------------------------------------------------------------------------
# Tokens coloured over the original text


def token_groups(offsets: list[list[int]]) -> list[tuple[int, int, list[int]]]:
    """Group consecutive tokens whose character spans overlap: the byte-level pieces of one
    character (an emoji is up to four bytes, so up to four tokens) become one coloured span."""
    groups: list[tuple[int, int, list[int]]] = []
    for i, (start, end) in enumerate(offsets):
        if groups and start < groups[-1][1] and end > start:
            g_start, g_end, members = groups[-1]
            groups[-1] = (g_start, max(g_end, end), members + [i])
        else:
            groups.append((start, end, [i]))
    return groups


def _tooltip(result: dict, members: list[int], text: str) -> str:
    lines = []
    for i in members:
        token, tid = result["tokens"][i], result["ids"][i]
        extra = f"  bytes {result['bytes'][i]}" if "bytes" in result else ""
        unk = "  (unknown)" if result["unknown"][i] else ""
        lines.append(f"#{i}  {token_label(token)!r}  id {tid}{extra}{unk}")
    start, end = result["offsets"][members[0]][0], result["offsets"][members[-1]][1]
    lines.append(f"characters {start}–{end}: {token_label(text[start:end])!r}")
    return html.escape("\n".join(lines), quote=True)


def token_spans_html(text: str, result: dict) -> str:
    """The original text with each token (group) on a coloured background; text no token covers
    (whitespace a pre-tokenizer dropped, characters a normaliser removed) stays grey."""
    parts, cursor = [], 0
    for n, (start, end, members) in enumerate(token_groups(result["offsets"])):
        if start > cursor:
            parts.append(f'<span class="gap" title="not in any token">{visible(text[cursor:start])}</span>')
        unknown = any(result["unknown"][i] for i in members)
        classes = f"tok c{n % PALETTE_SIZE}" + (" unk" if unknown else "") + (" multi" if len(members) > 1 else "")
        if end > start:
            body = visible(text[start:end])
        else:  # a token with no characters of its own
            body = html.escape(token_label(result["tokens"][members[0]]))
        parts.append(f'<span class="{classes}" data-s="{start}" data-e="{end}" '
                     f'title="{_tooltip(result, members, text)}">{body}</span>')
        cursor = max(cursor, end)
    if cursor < len(text):
        parts.append(f'<span class="gap" title="not in any token">{visible(text[cursor:])}</span>')
    return "".join(parts)


def _number(x: float | int | None, digits: int = 2) -> str:
    if x is None:
        return "–"
    return f"{x:,}" if isinstance(x, int) else f"{x:,.{digits}f}"


def tokens_html(text: str, results: dict[str, dict], labels: dict[str, str], notices: list[str] = ()) -> str:
    """Every tokenizer's split of one text, one row each, with its counts and ids."""
    rows = [f'<div class="notice">{html.escape(n)}</div>' for n in notices]
    if not text:
        rows.append('<div class="notice">Type or paste some text above to see how each tokenizer splits it.</div>')
    for key, result in results.items():
        stats = (f"{_number(result['n_tokens'])} tokens · {_number(result['chars_per_token'])} chars/token · "
                 f"{_number(result['n_unknown'])} unknown · vocabulary {_number(result['vocab_size'])}")
        ids = " ".join(str(i) for i in result["ids"])
        rows.append(
            f'<div class="tok-row" data-key="{html.escape(key)}">'
            f'<div class="tok-head"><span class="tok-name">{html.escape(labels.get(key, key))}</span>'
            f'<span class="tok-stats">{stats}</span></div>'
            f'<div class="tok-text" dir="auto">{token_spans_html(text, result)}</div>'
            f'<details class="tok-ids"><summary>ids</summary><code>{ids}</code></details></div>'
        )
    return f'<div class="tok-compare">{"".join(rows)}</div>'


# Hover a token: every token of every tokenizer that covers one of the same characters lights up.
TOKEN_HOVER_JS = """
element.addEventListener('mouseover', (event) => {
  const tok = event.target.closest('.tok');
  element.querySelectorAll('.tok.hl').forEach((el) => el.classList.remove('hl'));
  if (!tok) return;
  const s = +tok.dataset.s, e = +tok.dataset.e;
  element.querySelectorAll('.tok').forEach((el) => {
    if (+el.dataset.s < e && +el.dataset.e > s) el.classList.add('hl');
  });
});
element.addEventListener('mouseleave', () => {
  element.querySelectorAll('.tok.hl').forEach((el) => el.classList.remove('hl'));
});
"""


def token_count_figure(results: dict[str, dict], labels: dict[str, str]) -> go.Figure:
    """Tokens needed for the same text by each tokenizer, with characters per token on hover."""
    keys = list(results)
    fig = go.Figure(go.Bar(
        x=[results[k]["n_tokens"] for k in keys],
        y=[labels.get(k, k) for k in keys],
        orientation="h",
        text=[f"{results[k]['n_tokens']} tokens, {_number(results[k]['chars_per_token'])} chars/token" for k in keys],
        textposition="auto",
        marker_color=[ACCENT if results[k]["n_unknown"] else "#4a7bd0" for k in keys],
        hovertemplate="%{y}: %{x} tokens<extra></extra>",
    ), layout=layout(
        title=dict(text="Sequence length: the same text in each tokenizer (red: some tokens unknown)"),
        xaxis=dict(title=dict(text="tokens")), yaxis=dict(autorange="reversed"), height=90 + 40 * len(keys),
    ))
    return fig


# ---------------------------------------------------------------------------------------------
# Classic BPE, step by step


def chips(symbols: list[str], highlight: str | None = None, classes: str = "chip") -> str:
    return "".join(
        f'<span class="{classes}{" new" if s == highlight else ""}">{html.escape(s)}</span>' for s in symbols
    )


def bpe_step_html(trace: dict, step: int) -> str:
    """The corpus and the vocabulary after `step` merges (0: the initial split into characters)."""
    state = trace["initial"] if step == 0 else trace["steps"][step - 1]
    new = None if step == 0 else state["new_symbol"]
    if step == 0:
        head = "Step 0: every word split into characters, with the end-of-word marker </w>."
    else:
        head = (f"Step {step}: merge {state['pair'][0]!r} + {state['pair'][1]!r} → {new!r} "
                f"(the pair occurs {state['count']:,} times; {state['n_pairs']:,} distinct pairs were counted).")
    corpus_rows = "".join(
        f"<tr><td>{html.escape(row['word'])}</td><td>{chips(row['symbols'], new)}</td><td>{row['count']:,}</td></tr>"
        for row in state["corpus"]
    )
    vocab = "".join(
        f'<span class="chip{" new" if s == new else ""}">{html.escape(s)}<sub>{n:,}</sub></span>'
        for s, n in state["symbol_counts"].items()
    )
    n_vocab = len(trace["alphabet"]) + step
    return (
        f'<div class="bpe-step"><p class="bpe-head">{html.escape(head)}</p>'
        f'<table class="bpe-corpus"><thead><tr><th>word</th><th>symbols</th><th>count</th></tr></thead>'
        f"<tbody>{corpus_rows}</tbody></table>"
        f'<p class="bpe-head">Symbols in the corpus now, with their frequencies '
        f"(vocabulary: {len(trace['alphabet'])} characters + {step} merges = {n_vocab} symbols):</p>"
        f'<div class="bpe-vocab">{vocab}</div></div>'
    )


def bpe_pairs_figure(trace: dict, step: int) -> go.Figure:
    """The pair counts that decided merge `step` (the chosen pair in red)."""
    data = []
    if 1 <= step <= len(trace["steps"]):
        state = trace["steps"][step - 1]
        labels = [f"{a} + {b}" for a, b, _ in state["pair_counts"]]
        chosen = f"{state['pair'][0]} + {state['pair'][1]}"
        data.append(go.Bar(
            x=[n for _, _, n in state["pair_counts"]], y=labels, orientation="h",
            marker_color=[ACCENT if label == chosen else MUTED for label in labels],
            hovertemplate="%{y}: %{x}<extra></extra>",
        ))
        title = f"Step {step}: the top pair counts ({state['n_pairs']:,} distinct pairs)"
    else:
        title = "Step 0: no merge yet; move the step slider"
    return go.Figure(data, layout=layout(
        title=dict(text=title), xaxis=dict(title=dict(text="count (weighted by word frequency)")),
        yaxis=dict(autorange="reversed"), height=360,
    ))


def bpe_segment_html(segmented: list[dict]) -> str:
    rows = []
    for item in segmented:
        unknown = ""
        if item["unknown_chars"]:
            unknown = (f' <span class="warn">characters never seen in training: '
                       f'{html.escape(" ".join(item["unknown_chars"]))}</span>')
        path = " → ".join(f"<span title='after merge {a['step']}'>{chips(a['symbols'], a['new_symbol'])}</span>"
                          for a in item["applied"])
        rows.append(
            f'<div class="seg-row"><b>{html.escape(item["word"])}</b>: {chips(item["symbols"], classes="chip final")}'
            f'{unknown}<div class="seg-path">{path or "no merge applies: characters only"}</div></div>'
        )
    return "".join(rows)


# ---------------------------------------------------------------------------------------------
# WordPiece and Unigram: why this split


def wordpiece_html(explained: list[dict]) -> str:
    rows = []
    for item in explained:
        steps = []
        for step in item["steps"]:
            tried = ", ".join(html.escape(repr(r)) for r in step["rejected"])
            more = step["n_rejected"] - len(step["rejected"])
            tried_text = (f"tried and not in the vocabulary: {tried}{f' and {more} shorter' if more > 0 else ''}; "
                          if step["n_rejected"] else "")
            match = (f'longest match <span class="chip new">{html.escape(step["match"])}</span>' if step["match"]
                     else '<span class="warn">no match: the whole word becomes [UNK]</span>')
            steps.append(f"<li>at character {step['start']}: {tried_text}{match}</li>")
        reason = f' <span class="warn">({html.escape(item["reason"])})</span>' if item.get("reason") else ""
        rows.append(f'<div class="seg-row"><b>{html.escape(item["word"])}</b> → {chips(item["pieces"], classes="chip final")}'
                    f"{reason}<ol>{''.join(steps)}</ol></div>")
    return "".join(rows) or '<div class="notice">No words to explain.</div>'


def unigram_html(explained: list[dict]) -> str:
    rows = []
    for item in explained:
        segs = item["segmentations"]
        if not segs:
            continue
        best = segs[0]["total"]
        body = []
        for rank, seg in enumerate(segs):
            pieces = "".join(
                f'<span class="chip{" unk" if unk else ""}">{html.escape(p)}<sub>{lp:.2f}</sub></span>'
                for p, lp, unk in zip(seg["pieces"], seg["log_probs"], seg["unknown"])
            )
            delta = "best: the tokenizer's output" if rank == 0 else f"{seg['total'] - best:+.2f} (× {pow(2.718281828, seg['total'] - best):.2g} as probable)"
            body.append(f"<tr class='{'best' if rank == 0 else ''}'><td>{pieces}</td><td>{seg['total']:.2f}</td>"
                        f"<td>{delta}</td></tr>")
        rows.append(
            f'<div class="seg-row"><b>{html.escape(item["word"])}</b>'
            f'<table class="uni"><thead><tr><th>segmentation (log p of each piece)</th><th>log P = Σ log p</th>'
            f"<th>against the best</th></tr></thead><tbody>{''.join(body)}</tbody></table></div>"
        )
    return "".join(rows) or '<div class="notice">No words to explain.</div>'


# ---------------------------------------------------------------------------------------------
# Normalisation stages


def normalize_html(stages: list[dict]) -> str:
    rows = []
    for stage in stages:
        changed = set(stage["changed"])
        tokens = "".join(
            f'<span class="chip{" new" if i in changed else ""}">{html.escape(t)}</span>' for i, t in enumerate(stage["tokens"])
        )
        removed = "".join(f'<span class="chip removed">{html.escape(t)}</span>' for t in stage["removed"])
        removed = f'<div class="norm-removed">removed: {removed}</div>' if removed else ""
        rows.append(
            f'<div class="norm-row"><div class="tok-head"><span class="tok-name">{html.escape(stage["label"])}</span>'
            f'<span class="tok-stats">{stage["n_tokens"]} tokens · {stage["n_types"]} distinct</span></div>'
            f"<div>{tokens or '<i>nothing left</i>'}</div>{removed}</div>"
        )
    return "".join(rows)


# ---------------------------------------------------------------------------------------------
# RNN gradient flow: per-step gradient norms, the input-gradient strip, gates over time

CELL_COLOURS = {"rnn": ACCENT, "lstm": "#337ab7", "gru": "#3c9a5f"}


def _finite_positive(values) -> list:
    """None for what a log axis cannot show (null from overflow, 0)."""
    return [v if v is not None and v > 0 else None for v in values]


def gradient_flow_figure(cells: dict[str, dict], labels: dict[str, str], chars: list[str],
                         spans: list[tuple[int, int]] | None = None) -> go.Figure:
    """|dL_T/dh_t| against t on a log scale, one line per cell (LSTM: |dL_T/dc_t| dashed). `spans`: the
    sentence's characters at each step t = 1..T, kept in the layout's `meta` for the page to shade the
    selected word's steps (assets/focus.js)."""
    T = len(chars) - 1
    t = list(range(1, T + 1))
    hover_chars = [token_label(c) for c in chars[:T]]
    data, notes = [], []
    for key, r in cells.items():
        colour = CELL_COLOURS.get(key, MUTED)
        data.append(go.Scatter(
            x=t, y=_finite_positive(r["grad_norms"]), mode="lines+markers", marker=dict(size=4), name=labels[key],
            line=dict(color=colour, width=2), customdata=hover_chars,
            hovertemplate="t=%{x} ('%{customdata}'): %{y:.3e}<extra>" + html.escape(labels[key]) + "</extra>",
        ))
        if r.get("cell_grad_norms") is not None:
            data.append(go.Scatter(
                x=t, y=_finite_positive(r["cell_grad_norms"]), mode="lines", name=f"{labels[key]}: cell c_t",
                line=dict(color=colour, width=1.5, dash="dash"), customdata=hover_chars,
                hovertemplate="t=%{x} ('%{customdata}'): |dL/dc_t| %{y:.3e}<extra></extra>",
            ))
        if r["status"] == "overflow":
            notes.append(f"{labels[key]}: overflow (inf/NaN), not plotted")
    title = "How far back the training signal reaches: |∂L_T/∂h_t| (log scale)"
    return go.Figure(data, layout=layout(
        title=dict(text=title + ("<br><sub>" + html.escape("; ".join(notes)) + "</sub>" if notes else "")),
        xaxis=dict(title=dict(text="time step t (the loss is at the last step, T)")),
        yaxis=dict(title=dict(text="gradient norm"), type="log", exponentformat="power"),
        height=420, legend=dict(orientation="h", y=-0.2), hovermode="x unified",
        meta={"spans": [list(span) for span in spans], "x0": 1} if spans else None,
    ))


def gradient_strip_html(chars: list[str], cells: dict[str, dict], labels: dict[str, str]) -> str:
    """Each input character shaded by |dL_T/dx_t| (log scale, per cell): what the last prediction depends on."""
    import math

    T = len(chars) - 1
    rows = []
    for key, r in cells.items():
        norms = r["x_grad_norms"]
        logs = [math.log10(v) for v in norms if v is not None and v > 0]
        lo, hi = (min(logs), max(logs)) if logs else (0.0, 1.0)
        spans = []
        for ch, v in zip(chars[:T], norms):
            if v is None:
                spans.append(f'<span class="gf-ch gf-bad" title="overflow">{visible(ch)}</span>')
                continue
            level = 0.0 if v <= 0 or hi == lo else (math.log10(v) - lo) / (hi - lo)
            spans.append(f'<span class="gf-ch" style="background: rgba(51, 122, 183, {0.05 + 0.9 * level:.2f})" '
                         f'title="{html.escape(token_label(ch))}: {v:.3e}">{visible(ch)}</span>')
        spans.append(f'<span class="gf-ch gf-target" title="the character predicted at step T">'
                     f'{visible(chars[T])}</span>')
        span = f"10<sup>{lo:.0f}</sup> … 10<sup>{hi:.0f}</sup>" if logs else "no finite values"
        rows.append(f'<div class="gf-row"><div class="gf-head"><b>{html.escape(labels[key])}</b> '
                    f'<span class="gf-range">|∂L_T/∂x_t| from {span}</span></div>'
                    f'<div class="gf-text">{"".join(spans)}</div></div>')
    return "".join(rows)


def gradient_status_html(cells: dict[str, dict], labels: dict[str, str], notices: list[str] = ()) -> str:
    """An explicit verdict per cell (stable, vanishing, exploding, overflow) and the rates per step."""
    def num(v, fmt=".3f"):
        return "–" if v is None else format(v, fmt)

    rows = []
    for key, r in cells.items():
        rates = r["rates"]
        extra = ""
        if "sigma_max" in rates:
            extra = (f"σ<sub>max</sub>(W<sub>hh</sub>) = {num(rates['sigma_max'])}, rms σ = {num(rates['sigma_rms'])}, "
                     f"mean φ′ = {num(rates['mean_activation_derivative'])}; bound max φ′·σ<sub>max</sub> = "
                     f"{num(rates['bound'])}")
        elif "measured_cell" in rates:
            extra = f"measured on c<sub>t</sub>: {num(rates['measured_cell'])}"
        rows.append(
            f'<tr><td><span class="gf-badge gf-{r["status"]}">{r["status"]}</span></td><td>{html.escape(labels[key])}</td>'
            f"<td>{num(rates['measured'])}</td><td>{num(rates.get('predicted'))}</td>"
            f"<td>{html.escape(rates.get('theory', ''))}</td><td>{extra}</td>"
            f"<td>{html.escape(r['message'])}</td></tr>"
        )
    notes = "".join(f'<div class="notice">{html.escape(n)}</div>' for n in notices)
    return (f"{notes}<table class='gf-table'><thead><tr><th>status</th><th>cell</th><th>measured factor per step</th>"
            f"<th>predicted</th><th>prediction from</th><th>details</th><th>verdict</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


GATE_TITLES = {"f": "forget gate f_t", "i": "input gate i_t", "o": "output gate o_t", "c": "cell state c_t",
               "z": "update gate z_t (1 keeps h_{t-1})", "r": "reset gate r_t"}


def gates_figure(gates: dict[str, list], chars: list[str], label: str) -> go.Figure:
    """One heatmap per gate, stacked: time across, units down, the value on hover (gates in [0, 1])."""
    import numpy as np

    names = list(gates)
    T = len(chars) - 1
    x = np.arange(1, T + 1)
    n = len(names)
    gap = 0.06
    height = (1 - gap * (n - 1)) / n
    data, axes, notes = [], {}, []
    hover_chars = np.array([token_label(c) for c in chars[:T]], dtype=object)
    for k, name in enumerate(names):
        z = np.asarray(gates[name], dtype=float).T          # (units, T); numpy: plotly validates it in one go
        units = z.shape[0]
        suffix = "" if k == 0 else str(k + 1)
        is_cell = name == "c"
        data.append(go.Heatmap(
            z=z, x=x, y=np.arange(units), xaxis=f"x{suffix}", yaxis=f"y{suffix}",
            customdata=np.tile(hover_chars, (units, 1)),
            colorscale="RdBu" if is_cell else "Viridis", zmid=0 if is_cell else None,
            zmin=None if is_cell else 0, zmax=None if is_cell else 1, showscale=k == 0 or is_cell,
            colorbar=dict(len=height, y=1 - k * (height + gap) - height / 2, yanchor="middle", thickness=12),
            hovertemplate=f"{GATE_TITLES[name]}<br>t=%{{x}} ('%{{customdata}}'), unit %{{y}}: %{{z:.3f}}<extra></extra>",
        ))
        top = 1 - k * (height + gap)
        axes[f"yaxis{suffix}"] = dict(domain=[max(0.0, top - height), min(1.0, top)], title=dict(text="unit"),
                                      autorange="reversed")
        axes[f"xaxis{suffix}"] = dict(anchor=f"y{suffix}", matches="x" if k else None, showticklabels=k == n - 1)
        notes.append(dict(text=GATE_TITLES[name], x=0, y=top, xref="paper", yref="paper", xanchor="left",
                          yanchor="bottom", showarrow=False, font=dict(size=13)))
    return go.Figure(data, layout=layout(
        title=dict(text=f"{label}: gates over time (first {len(gates[names[0]][0]) if names else 0} units)"),
        height=120 + 200 * n, annotations=notes, margin=dict(l=10, r=10, t=70, b=40), **axes,
    ))


# ---------------------------------------------------------------------------------------------
# Generation: the text as it is generated, one step's next-token distribution, causal attention

GEN_CLICK_JS = """
element.addEventListener('click', (event) => {
  const tok = event.target.closest('.gen-tok');
  if (!tok) return;
  element.querySelectorAll('.gen-tok.sel').forEach((el) => el.classList.remove('sel'));
  tok.classList.add('sel');
  trigger('click', {step: +tok.dataset.step});
});
"""


def generated_html(prompt: str, steps: list[dict], selected: int | None = None, notices: list[str] = (),
                   title: str = "", running: bool = False) -> str:
    """The prompt (grey) then each generated token, shaded by the probability it was drawn with;
    a click on a token selects its step (GEN_CLICK_JS)."""
    parts = [f'<div class="notice">{html.escape(n)}</div>' for n in notices]
    if title:
        parts.append(f'<div class="gen-title">{html.escape(title)}</div>')
    tokens = []
    for i, s in enumerate(steps):
        alpha = 0.12 + 0.5 * (1.0 - s["prob"])  # darker = a less likely choice
        tip = html.escape(f"step {i + 1}: {token_label(s['token'])!r}, p = {s['prob']:.3f}, "
                          f"entropy {s['entropy']:.2f} nats", quote=True)
        sel = " sel" if selected == i else ""
        tokens.append(f'<span class="gen-tok{sel}" data-step="{i}" style="background: rgba(217, 83, 79, {alpha:.2f})" '
                      f'title="{tip}">{html.escape(s["token"])}</span>')  # plain text: spaces and line breaks as such
    cursor = '<span class="gen-cursor">▍</span>' if running else ""
    parts.append(f'<div class="gen-text"><span class="gen-prompt">{html.escape(prompt)}</span>{"".join(tokens)}{cursor}'
                 '</div>')
    return "".join(parts)


def next_token_figure(step: dict, index: int, cutoffs: tuple[str, ...] = ("top-k", "top-p")) -> go.Figure:
    """One step's proposed distribution over its most probable tokens, ranked; the tokens top-k and
    top-p keep in blue, the cut ones grey, the chosen token red, the two cut-offs as dashed lines."""
    labels = [f"{rank + 1}. {token_label(tok)!r}" for rank, (tok, _) in enumerate(step["top"])]
    probs = [p for _, p in step["top"]]
    kept = min(step["n_top_k"], step["n_top_p"])
    colors = [ACCENT if tok == step["token"] else ("#4a7bd0" if rank < kept else "#c8c8c8")
              for rank, (tok, _) in enumerate(step["top"])]
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
    title = (f"Step {index + 1}: chose {token_label(step['token'])!r} (p = {step['prob']:.3f}); "
             f"entropy {step['entropy']:.2f} nats" + (f"; {', '.join(beyond)}" if beyond else ""))
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
    return go.Figure(fig.data, layout=layout(
        title=dict(text=title, font=dict(size=14)), height=side, width=side + 80,
        yaxis=dict(autorange="reversed", title=dict(text="query (generating)")),
        xaxis=dict(title=dict(text="key (attended to)"), tickangle=-90),
    ))


def memory_figures(result: dict, labels: dict[str, str]) -> tuple[go.Figure, go.Figure]:
    """The memory experiment: accuracy against the distance k to the key, and the training loss curves."""
    chance = 1 / result["config"]["n_keys"]
    acc, loss = [], []
    for key, r in result["cells"].items():
        colour = CELL_COLOURS.get(key, MUTED)
        name = f"{labels.get(key, key)} ({r['n_params']:,} recurrent parameters)"
        acc.append(go.Scatter(x=result["k"], y=r["accuracy"], mode="lines+markers", name=name,
                              line=dict(color=colour, width=2), marker=dict(size=5),
                              hovertemplate="k=%{x}: accuracy %{y:.2f}<extra>" + html.escape(labels.get(key, key)) + "</extra>"))
        loss.append(go.Scatter(x=[s for s, _ in r["loss_curve"]], y=[v for _, v in r["loss_curve"]], mode="lines",
                               name=labels.get(key, key), line=dict(color=colour, width=2),
                               hovertemplate="step %{x}: loss %{y:.3f}<extra></extra>"))
    acc.append(go.Scatter(x=[result["k"][0], result["k"][-1]], y=[chance, chance], mode="lines", name="chance",
                          line=dict(color="#999", dash="dot"), hoverinfo="skip"))
    acc_fig = go.Figure(acc, layout=layout(
        title=dict(text="Accuracy against the distance k to the key"), height=380,
        xaxis=dict(title=dict(text="k: steps between the key and the answer")),
        yaxis=dict(title=dict(text="accuracy"), range=[0, 1.05]), legend=dict(orientation="h", y=-0.25)))
    loss_fig = go.Figure(loss, layout=layout(
        title=dict(text="Training loss (cross-entropy at the last step)"), height=380,
        xaxis=dict(title=dict(text="Adam step")), yaxis=dict(title=dict(text="loss"), type="log"),
        legend=dict(orientation="h", y=-0.25)))
    return acc_fig, loss_fig
