"""Figure builders for the Attention tab: arrays and token labels in, HTML/SVG or plotly out. No torch, no gradio.

- `head_view_html`: BertViz's head view made on the server as SVG: one colour per head, a line from
  each query token (left) to the keys it attends to (right), opacity = weight; a little JS
  (HEAD_VIEW_JS, run by `gr.HTML(js_on_load=...)`) toggles heads, filters sentence pairs and shows
  only the hovered token's lines. No script tag, no CDN: Gradio's HTML component runs no <script>.
- `model_view_html`: every layer x head as a thumbnail (a small PNG per head), click to pick one.
- `heatmap_figure`: one head (or the mean / max over heads) as a plotly heatmap with values on hover.
- `steps_figure`: inside one head, from Q K^T to softmax and its gradient.

The CSS classes live in assets/style.css (section "Attention tab").
"""

from __future__ import annotations

import base64
import html
import io

import numpy as np
import plotly.graph_objects as go

from playground.figures.common import distinguish, layout, row_labels, token_label

# Twelve distinguishable head colours (Tableau 10 plus two), cycled for more heads
HEAD_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                "#bcbd22", "#17becf", "#393b79", "#ad494a"]
ROW_H, TEXT_W, GAP_W, CHAR_W = 20, 240, 200, 8  # head view geometry in px (TEXT_W: the widest token column)


def labels(tokens: list[str]) -> list[str]:
    """Unique axis labels: the position first, so a repeated token stays two rows ("3 the", "7 the")."""
    return [f"{i} {token_label(t)}" for i, t in enumerate(tokens)]


def _side(segments: list[int], i: int) -> str:
    return "b" if segments[i] else "a"


def head_view_html(tokens: list[str], segments: list[int], A_layer: np.ndarray,
                   edges: list[tuple[int, int, int, float]], layer: int, note: str = "",
                   spans: list[tuple[int, int]] | None = None, shown: int | None = None) -> str:
    """The head view of one layer. A_layer (H, T, T) gives the heads' count; `edges` (head, query,
    key, weight) are the lines drawn (the server keeps the strongest, see attention.top_edges). `shown`: the one
    head drawn at first (the others a click away); None: every head. The box is as tall as its tokens, up to
    the screen's height (then it scrolls), and as wide as its longest token."""
    H, T = A_layer.shape[0], len(tokens)
    is_pair = any(segments)
    fits = (TEXT_W - 12) // CHAR_W  # characters of a token label the column holds
    shown_labels = [label if len(label) <= fits else label[:fits - 1] + "…" for label in map(token_label, tokens)]
    names = [html.escape(label) for label in shown_labels]
    text_w = max(48, CHAR_W * max(map(len, shown_labels), default=1) + 12)
    x1, x2 = text_w + 6, text_w + GAP_W - 6
    height = ROW_H * T + 10
    groups = {h: [] for h in range(H)}
    for h, i, j, w in edges:
        y1, y2 = ROW_H * i + ROW_H // 2 + 5, ROW_H * j + ROW_H // 2 + 5
        pair = _side(segments, i) + _side(segments, j)
        groups[h].append(f'<path class="q{i} k{j} {pair}" d="M{x1} {y1}L{x2} {y2}" stroke-opacity="{w:.2f}"/>')
    on = set(range(H)) if shown is None else {shown}
    lines = "".join(
        f'<g class="hv-head{"" if h in on else " off"}" data-h="{h}" '
        f'stroke="{HEAD_COLOURS[h % len(HEAD_COLOURS)]}">{"".join(paths)}</g>'
        for h, paths in groups.items()
    )
    text = []
    for i, tok in enumerate(tokens):
        y = ROW_H * i + ROW_H // 2 + 5
        side = _side(segments, i)
        label = names[i]
        s, e = spans[i] if spans else (-1, -1)  # the token's characters in the sentence, for the selected word
        text.append(f'<text class="hv-t {side}" data-side="q" data-i="{i}" data-s="{s}" data-e="{e}" x="{text_w}" '
                    f'y="{y}" text-anchor="end" dominant-baseline="middle">{label}</text>')
        text.append(f'<text class="hv-t {side}" data-side="k" data-i="{i}" data-s="{s}" data-e="{e}" '
                    f'x="{text_w + GAP_W}" y="{y}" dominant-baseline="middle">{label}</text>')
    width = 2 * text_w + GAP_W
    heads = "".join(
        f'<label class="hv-hb" title="head {h}"><input type="checkbox" data-h="{h}" aria-label="head {h}"'
        f'{" checked" if h in on else ""}><span style="{_head_style(HEAD_COLOURS[h % len(HEAD_COLOURS)])}">{h}</span>'
        "</label>"
        for h in range(H)
    )
    filters = ""
    if is_pair:
        filters = '<span class="hv-filters">' + "".join(
            f'<label><input type="radio" name="hv-filter" value="{v}"{" checked" if v == "all" else ""}> {t}</label>'
            for v, t in (("all", "all"), ("aa", "A→A"), ("ab", "A→B"), ("ba", "B→A"), ("bb", "B→B"))
        ) + "</span>"
    note_html = f'<div class="notice">{html.escape(note)}</div>' if note else ""
    opening = ("" if shown is None else f"Head {shown} is drawn (the one that looks most sharply at one other word, "
               "unless you chose a head for the heatmap); click the coloured squares to add heads, or <b>all</b>. ")
    if height > 600:
        opening += f"{T} tokens: scroll inside the box to reach them all. "
    return (
        f'<div class="hv" data-layer="{layer}">{note_html}'
        f'<div class="hv-controls"><span>Layer {layer} · heads (click to toggle):</span> {heads} '
        f'<button type="button" class="hv-all">all</button><button type="button" class="hv-none">none</button>'
        f"{filters}</div>"
        f'<div class="hv-help">{opening}Left: each token as a query; right: the same tokens as keys. Hover a token '
        f"to see only its lines (left: where it looks; right: who looks at it), or Tab into the box and use the "
        f"arrow keys (up and down: a token; left and right: query or key side).</div>"
        f'<div class="hv-scroll" tabindex="0" role="group" aria-label="Head view, layer {layer}: arrow keys choose a '
        f'token, its strongest lines are listed below"><svg class="hv-svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg" aria-hidden="true">'
        f'<g class="hv-lines" fill="none" stroke-width="2">{lines}</g>{"".join(text)}</svg></div>'
        '<div class="kb-info" aria-live="polite"></div></div>'
    )


def _head_style(colour: str) -> str:
    """A head's square: its colour, and a number in black or white, whichever reads at 4.5:1 on it (WCAG's
    relative luminance; white on Tableau's orange or olive is below 3:1)."""
    channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    text = "#000" if (luminance + 0.05) / 0.05 >= 1.05 / (luminance + 0.05) else "#fff"
    return f"background:{colour};color:{text};--hv-colour:{colour}"


# Runs once when the component mounts; listeners are delegated to `element`, so they keep working
# each time the server sends a new view.
HEAD_VIEW_JS = """
const clear = () => {
  const hv = element.querySelector('.hv');
  if (!hv) return;
  hv.classList.remove('hover');
  hv.querySelectorAll('.on').forEach((el) => el.classList.remove('on'));
};
const show = (t) => {
  clear();
  if (!t) return;
  const hv = element.querySelector('.hv');
  hv.classList.add('hover');
  t.classList.add('on');
  const cls = (t.dataset.side === 'q' ? '.q' : '.k') + t.dataset.i;
  hv.querySelectorAll('path' + cls).forEach((el) => el.classList.add('on'));
  return cls;
};
element.addEventListener('mouseover', (event) => show(event.target.closest('.hv-t')));
element.addEventListener('mouseleave', clear);
// The keyboard's hover: arrow keys move a token cursor; the lines drawn for it are listed in words (.kb-info),
// strongest first, from the lines' own weights (their opacity) in the heads that are on
const say = (t, cls) => {
  const hv = element.querySelector('.hv'), info = hv.querySelector('.kb-info'), query = t.dataset.side === 'q';
  const name = (side, i) => hv.querySelector(`.hv-t[data-side="${side}"][data-i="${i}"]`).textContent;
  const lines = [...hv.querySelectorAll('.hv-head:not(.off) path' + cls)].map((p) => {
    const other = p.getAttribute('class').match(query ? /\\bk(\\d+)/ : /\\bq(\\d+)/)[1];
    return [+p.getAttribute('stroke-opacity'), p.parentNode.dataset.h, name(query ? 'k' : 'q', other)];
  }).sort((a, b) => b[0] - a[0]).slice(0, 6);
  const what = query ? 'attends to' : 'is attended by';
  info.textContent = `${query ? 'Query' : 'Key'} ${t.dataset.i} "${t.textContent}" ${what}: ` + (lines.length
    ? lines.map(([w, h, other]) => `"${other}" ${w.toFixed(2)} (head ${h})`).join(', ') : 'no line drawn');
};
element.addEventListener('keydown', (event) => {
  const box = event.target.closest('.hv-scroll');
  const moves = {ArrowDown: [1, 0], ArrowUp: [-1, 0], ArrowLeft: [0, 'q'], ArrowRight: [0, 'k']};
  if (!box || !(event.key in moves)) return;
  event.preventDefault();
  const count = box.querySelectorAll('.hv-t[data-side="q"]').length;
  const [step, side] = moves[event.key];
  const at = box.dataset.at === undefined ? (step < 0 ? count : -1) : +box.dataset.at;
  box.dataset.at = Math.max(0, Math.min(count - 1, at + step));
  box.dataset.side = side || box.dataset.side || 'q';
  const t = box.querySelector(`.hv-t[data-side="${box.dataset.side}"][data-i="${box.dataset.at}"]`);
  say(t, show(t));
  t.scrollIntoView({block: 'nearest'});
});
element.addEventListener('change', (event) => {
  const input = event.target;
  const hv = element.querySelector('.hv');
  if (!hv) return;
  if (input.dataset.h !== undefined) {
    hv.querySelector(`.hv-head[data-h="${input.dataset.h}"]`).classList.toggle('off', !input.checked);
  } else if (input.name === 'hv-filter') {
    ['aa', 'ab', 'ba', 'bb'].forEach((f) => hv.classList.remove('f-' + f));
    if (input.value !== 'all') hv.classList.add('f-' + input.value);
  }
});
element.addEventListener('click', (event) => {
  const button = event.target.closest('.hv-all, .hv-none');
  if (!button) return;
  const on = button.classList.contains('hv-all');
  element.querySelectorAll('.hv-hb input').forEach((input) => { input.checked = on; });
  element.querySelectorAll('.hv-head').forEach((g) => g.classList.toggle('off', !on));
});
"""


def _png(M: np.ndarray, colour: tuple[int, int, int] = (31, 119, 180)) -> str:
    """A (n, n) matrix of weights in [0, 1] as a PNG data URI: white (0) to `colour` (1)."""
    from PIL import Image

    w = np.clip(M, 0.0, 1.0)[..., None]                      # (n, n, 1)
    rgb = (255 - w * (255 - np.array(colour, dtype=np.float32))).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(rgb, "RGB").save(buffer, format="PNG", compress_level=1)  # fast: the thumbnails are small anyway
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


TILE = 40  # model view: px per thumbnail


def model_view_html(thumbs: np.ndarray, selected: tuple[int, int], factor: int) -> str:
    """thumbs (L, H, n, n): every head's attention, pooled on the server to n x n (block max when
    factor > 1). One PNG holds all the thumbnails (one encode, not L x H); each tile shows its part
    of it. Click a tile to enlarge it (HEAD_PICK_JS sends the choice to the server)."""
    L, H, n = thumbs.shape[:3]
    gap = np.ones((L, H, n + 1, n + 1), dtype=np.float32) * 0.0
    gap[:, :, :n, :n] = thumbs
    sprite = gap.transpose(0, 2, 1, 3).reshape(L * (n + 1), H * (n + 1))  # layers down, heads across
    scale = TILE / n
    size = f"{H * (n + 1) * scale:.2f}px {L * (n + 1) * scale:.2f}px"
    head_row = "".join(f'<div class="mv-col">{h}</div>' for h in range(H))
    rows = []
    for l in range(L):
        tiles = "".join(
            f'<div class="mv-tile{" sel" if (l, h) == tuple(selected) else ""}" data-l="{l}" data-h="{h}" '
            f'role="button" tabindex="0" title="layer {l}, head {h}: click to enlarge" style="background-position:'
            f'-{h * (n + 1) * scale:.2f}px -{l * (n + 1) * scale:.2f}px"></div>'
            for h in range(H)
        )
        rows.append(f'<div class="mv-row"><div class="mv-lab">layer {l}</div>{tiles}</div>')
    pooled = (f" Each thumbnail shows blocks of {factor} × {factor} tokens (their strongest weight)."
              if factor > 1 else "")
    return (f'<div class="mv"><div class="mv-help">Rows: layers (0 is closest to the input); columns: heads. '
            f"Each tile is one head's T × T attention (row = query, column = key; darker = more weight).{pooled}</div>"
            f'<div class="mv-grid" style="--mv-sprite:url({_png(sprite)});--mv-size:{size}">'
            f'<div class="mv-row"><div class="mv-lab">head</div>{head_row}</div>{"".join(rows)}</div></div>')


HEAD_PICK_JS = """
const pick = (tile) => {
  element.querySelectorAll('.mv-tile.sel').forEach((el) => el.classList.remove('sel'));
  tile.classList.add('sel');
  trigger('select', {index: [+tile.dataset.l, +tile.dataset.h], value: tile.title});
};
element.addEventListener('click', (event) => {
  const tile = event.target.closest('.mv-tile');
  if (tile) pick(tile);
});
element.addEventListener('keydown', (event) => {  // a tile is a button: Enter and Space press it
  const tile = event.target.closest('.mv-tile');
  if (!tile || (event.key !== 'Enter' && event.key !== ' ')) return;
  event.preventDefault();
  pick(tile);
});
"""


def heatmap_figure(tokens: list[str], M: np.ndarray, title: str, factor: int = 1, keep: list[int] | None = None,
                   causal: bool = False, spans: list[tuple[int, int]] | None = None) -> go.Figure:
    """M (n, n): attention of one head (or an aggregate); rows are queries, columns keys. `keep`: the
    positions shown (special tokens hidden); `factor` > 1: M is pooled in blocks of factor tokens.
    `spans`: each token's characters in the sentence, kept in the layout's `meta` (one per row shown) so
    the page can draw the selected word's row and column (assets/focus.js)."""
    if factor > 1:
        T = len(tokens)
        names = [f"{a}–{min(a + factor, T) - 1} {token_label(tokens[a])}…" for a in range(0, T, factor)]
    else:
        all_names = labels(tokens)
        names = [all_names[i] for i in keep] if keep is not None else all_names
    # every query row labelled (the selected word's too) in a font its row holds: 16 px a row, up to 1000 px
    n = len(names)
    height = max(420, min(1000, 170 + 16 * n))
    below = 40 + 0.52 * 12 * min(max(map(len, names), default=1), 24)  # the keys' labels at -60° and their title
    rows = row_labels(n, height - 70 - below)
    fig = go.Figure(go.Heatmap(
        z=M.astype(np.float32), x=names, y=names, colorscale="Blues", zmin=0,
        hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>",
        colorbar=dict(title=dict(text="weight"), thickness=12),
    ), layout=layout(
        title=dict(text=title), height=height,
        xaxis=dict(title=dict(text="key (attended to)"), tickangle=-60, type="category", showgrid=False,
                   tickfont=rows["tickfont"]),
        yaxis=dict(title=dict(text="query (attending)"), autorange="reversed", type="category", showgrid=False,
                   **rows),
        margin=dict(l=10, r=10, t=60, b=10),
    ))
    if spans:
        rows = [list(range(a, min(a + factor, len(tokens)))) for a in range(0, len(tokens), factor)] if factor > 1 \
            else [[i] for i in (keep if keep is not None else range(len(tokens)))]
        fig.layout.meta = {"spans": [[min((spans[i][0] for i in r if spans[i][0] >= 0), default=-1),
                                      max((spans[i][1] for i in r if spans[i][0] >= 0), default=-1)] for r in rows]}
    if causal:
        fig.add_annotation(text="causal: keys after the query are masked (exactly 0)", showarrow=False,
                           xref="paper", yref="paper", x=1, y=1.04, xanchor="right", font=dict(size=12))
    return fig


def steps_figure(tokens: list[str], q: np.ndarray, k: np.ndarray, v: np.ndarray, steps: dict,
                 scale_text: str) -> go.Figure:
    """Inside one head: Q, K, V and the output on the first row; Q K^T, scaled (and masked), softmax
    and its gradient σ(1 − σ) on the second."""
    from plotly.subplots import make_subplots  # imported on first use: 0.25 s of the app's startup

    names = labels(tokens)
    dims = [str(d) for d in range(q.shape[1])]
    fig = make_subplots(rows=2, cols=4, horizontal_spacing=0.08, vertical_spacing=0.12, subplot_titles=(
        "Q = X W^Q", "K = X W^K", "V = X W^V", "output = softmax(·) V",
        "scores Q Kᵀ", f"scaled {scale_text} (+ mask)", "softmax: attention weights", "σ_i(1 − σ_i): softmax gradient",
    ))
    panels = [
        (1, 1, q, dims, "RdBu", None), (1, 2, k, dims, "RdBu", None), (1, 3, v, dims, "RdBu", None),
        (1, 4, steps["out"], dims, "RdBu", None),
        (2, 1, steps["raw"], names, "RdBu", None),
        (2, 2, np.where(np.isfinite(steps["masked"]), steps["masked"], np.nan),
                                                    names, "RdBu", None),
        (2, 3, steps["probs"], names, "Blues", (0, 1)), (2, 4, steps["grad"], names, "Oranges", (0, 0.25)),
    ]
    for row, col, z, x, scale, bounds in panels:
        extra = dict(zmin=bounds[0], zmax=bounds[1]) if bounds else dict(zmid=0)
        # the softmax and its gradient have absolute scales (a weight of 1 is one-hot): their colour bars are shown
        fig.add_trace(go.Heatmap(z=np.asarray(z, dtype=np.float32), x=x, y=names, colorscale=scale,
                                 showscale=bool(bounds), colorbar=_bar_beside(fig, row, col) if bounds else None,
                                 hovertemplate="%{y} · %{x}: %{z:.3f}<extra></extra>", **extra), row=row, col=col)
    fig.update_layout(**layout(height=760, margin=dict(l=10, r=10, t=40, b=10)))
    fig.update_yaxes(autorange="reversed", type="category", showticklabels=False)
    fig.update_yaxes(showticklabels=True, col=1)
    fig.update_xaxes(showticklabels=False, type="category")
    return distinguish(fig)


def _bar_beside(fig: go.Figure, row: int, col: int) -> dict:
    """A colour bar just right of one subplot and as tall as it (plotly puts every bar at the figure's right)."""
    sub = fig.get_subplot(row, col)
    (_, right), (bottom, top) = sub.xaxis.domain, sub.yaxis.domain
    return dict(x=right + 0.006, xanchor="left", y=(bottom + top) / 2, yanchor="middle", len=top - bottom,
                thickness=10, xpad=0, ypad=0)


def saturation_figure(scales: list[float], max_prob: list[float], grad: list[float], current: float) -> go.Figure:
    """How the scale of the logits drives the softmax into saturation: mean largest weight per row and
    mean σ_i(1 − σ_i) of that weight, against the factor the scores are multiplied by."""
    fig = go.Figure([
        go.Scatter(x=scales, y=max_prob, name="mean largest weight in a row", mode="lines"),
        go.Scatter(x=scales, y=grad, name="mean σ(1 − σ) at that weight (gradient)", mode="lines"),
    ], layout=layout(
        title=dict(text="Scaling the scores: larger logits → one-hot rows → vanishing softmax gradient"),
        xaxis=dict(title=dict(text="factor on Q Kᵀ (1/√d_k is the paper's)"), type="log"),
        yaxis=dict(range=[0, 1.02]), height=340, legend=dict(orientation="h", y=-0.3),
    ))
    fig.add_vline(x=current, line_dash="dot", line_color="#d9534f")
    return distinguish(fig)


def positional_figure(pe: np.ndarray, dots: np.ndarray, learned: np.ndarray | None, learned_name: str,
                      rope: np.ndarray | None = None, alibi: np.ndarray | None = None) -> go.Figure:
    """The sinusoidal PE matrix (positions x dimensions), the dot products PE PE^T between positions,
    and, to compare, the cosine similarity of a trained model's learned position embeddings; below, RoPE's
    scores <R_m q, R_n k> between positions and ALiBi's distance penalties (head 1), when given."""
    from plotly.subplots import make_subplots

    cols = 3 if learned is not None else 2
    rows = 2 if rope is not None else 1
    titles = ["PE: position × dimension", "PE · PE between positions"]
    if learned is not None:
        titles.append(f"cosine of {learned_name}'s<br>learned position embeddings")  # a third of the width
    if rows == 2:
        titles += ["RoPE: ⟨R_m q, R_n k⟩ (one q, one k)", "ALiBi: −m₁ (i − j), head 1"] + [""] * (cols - 2)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles, horizontal_spacing=0.12, vertical_spacing=0.12)
    # each panel its own colour bar beside it: their scales differ (PE in [-1, 1], PE · PE up to d/2, cosines,
    # RoPE's scores, ALiBi's penalties)
    fig.add_trace(go.Heatmap(z=pe, colorscale="RdBu", zmid=0, colorbar=_bar_beside(fig, 1, 1),
                             hovertemplate="position %{y}, dimension %{x}: %{z:.3f}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Heatmap(z=dots, colorscale="Viridis", colorbar=_bar_beside(fig, 1, 2),
                             hovertemplate="positions %{y} · %{x}: %{z:.2f}<extra></extra>"), row=1, col=2)
    if learned is not None:
        fig.add_trace(go.Heatmap(z=learned, colorscale="Viridis", colorbar=_bar_beside(fig, 1, 3),
                                 hovertemplate="positions %{y}, %{x}: cosine %{z:.2f}<extra></extra>"), row=1, col=3)
    if rows == 2:
        fig.add_trace(go.Heatmap(z=rope, colorscale="RdBu", zmid=0, colorbar=_bar_beside(fig, 2, 1),
                                 hovertemplate="query at %{y}, key at %{x}: %{z:.2f}<extra></extra>"), row=2, col=1)
        fig.add_trace(go.Heatmap(z=alibi, colorscale="Viridis", colorbar=_bar_beside(fig, 2, 2),
                                 hovertemplate="query %{y}, key %{x}: %{z:.3f}<extra></extra>"), row=2, col=2)
    fig.update_layout(**layout(height=460 * rows, margin=dict(l=10, r=10, t=50, b=30)))
    fig.update_yaxes(autorange="reversed")
    fig.update_yaxes(title_text="position", row=1, col=1)
    fig.update_xaxes(title_text="dimension", row=1, col=1)
    fig.update_xaxes(title_text="position", row=1, col=2)
    if learned is not None:
        fig.update_xaxes(title_text="position", row=1, col=3)
    if rows == 2:
        fig.update_yaxes(title_text="query position m", row=2, col=1)
        fig.update_xaxes(title_text="key position n", row=2, col=1)
        fig.update_xaxes(title_text="key position j", row=2, col=2)
    return fig


def head_summary_figure(summary: dict[str, list[list[float]]], titles: dict[str, str],
                        kv_heads: list[int]) -> go.Figure:
    """One small heatmap per score (layers down, heads across): a head's role at a glance (a bright cell in
    "previous" is a previous-token head). With grouped key/value heads the head labels say their group."""
    from plotly.subplots import make_subplots

    keys = list(titles)
    L, H = len(summary[keys[0]]), len(summary[keys[0]][0])
    top = {k: float(np.max(summary[k])) if k in ("entropy", "distance") else 1.0 for k in keys}  # white 0, dark top
    fig = make_subplots(rows=2, cols=3, subplot_titles=[f"{titles[k]} (white 0, dark {top[k]:.3g})" for k in keys],
                        horizontal_spacing=0.06, vertical_spacing=0.16)
    grouped = len(set(kv_heads)) < H
    heads = [f"h{h}" + (f" (kv {kv_heads[h]})" if grouped else "") for h in range(H)]
    for n, key in enumerate(keys):
        z = np.array(summary[key])
        fig.add_trace(go.Heatmap(z=z, x=heads, y=[f"layer {i}" for i in range(L)], colorscale="Blues",
                                 showscale=False, zmin=0, zmax=max(top[key], 1e-9),
                                 hovertemplate=f"%{{y}}, %{{x}}: {key} %{{z:.3f}}<extra></extra>"),
                      row=n // 3 + 1, col=n % 3 + 1)
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.update_yaxes(showticklabels=True, col=1)
    fig.update_xaxes(showticklabels=False)
    fig.update_layout(**layout(height=max(360, 140 + 2 * 14 * L), margin=dict(l=70, r=10, t=60, b=20)))
    fig.update_annotations(font_size=11)
    return fig


# ---------------------------------------------------------------------------------------------
# Reading the patterns: the notes under the head view, for the chosen model's family, with its numbers

NOT_EXPLANATIONS = ("Others follow syntax (a determiner to its noun, an object to its verb) or link a word to its "
                    "earlier mentions. **Attention weights are not explanations**: a weight says how much of a value "
                    "vector is mixed in, not how much that token mattered for the prediction. Values have different "
                    "norms, later layers mix already-mixed vectors, and different weights can give the same output "
                    "(Jain & Wallace 2019; Wiegreffe & Pinter 2019). Treat the views as a microscope on the "
                    "computation, not as the model's reasons.")


def reading_md(name: str, r: dict) -> str:
    """The notes on where heads rest, for a BERT ([CLS], [SEP]) or a causal model (the first token), with this
    text's numbers (`analysis.attention.resting_places`)."""
    heads = f"{r['layers']} × {r['heads']} heads"
    if r["family"] == "bert":
        return ("**Reading the patterns.** In BERT, Clark et al. (2019, *What does BERT look at?*) found many heads "
                "putting most of their weight on `[SEP]` or `[CLS]`, or on the token itself or its neighbour; "
                "attention to `[SEP]` often works as a \"no-op\": a head with nothing to do parks its weight there. "
                f"**In {name} on this text** (its {heads}, every query): `[CLS]` gets {r['cls']:.0%} of a query's "
                f"weight on average and `[SEP]` {r['sep']:.0%} (spread evenly: {r['cls_even']:.0%} and "
                f"{r['sep_even']:.0%}); {r['heads_over_half_cls']} heads give `[CLS]` more than half, "
                f"{r['heads_over_half_sep']} give `[SEP]` more than half. " + NOT_EXPLANATIONS)
    start = ("**Reading the patterns.** A causal model has no `[CLS]` or `[SEP]`: each token sees itself and the "
             "tokens before it. Many language models park an idle head's weight on the first token, whatever it is "
             "(an *attention sink*, Xiao et al. 2023: the softmax has to put the weight somewhere). ")
    if r["first"] is None:
        return start + "One token is too few to measure it. " + NOT_EXPLANATIONS
    who = name[:1].upper() + name[1:]  # "our GPT" starts a sentence
    verdict = (f"{who} parks its attention on the first token" if r["first"] > 2 * r["first_even"] else
               f"{who} does not park its attention there")  # twice the even share: a sink, not chance
    return (start + f"**In {name} on this text** (its {heads}, the queries after the first): the first token gets "
            f"{r['first']:.0%} of a query's weight on average, where a head spreading its weight evenly over what it "
            f"may see would give it {r['first_even']:.0%}; {r['heads_over_half']} of the {r['layers'] * r['heads']} "
            f"heads give it more than half. {verdict}. " + NOT_EXPLANATIONS)
