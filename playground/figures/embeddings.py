"""Figure builders of the Embeddings tab: points, similarity matrices and tables in, plotly figures, HTML
and the Markdown summaries out. No torch, no gradio.

Scatter plots use WebGL (Scattergl; Scatter3d is WebGL already), so 10,000 labelled points stay
interactive; labels are drawn as text only up to LABEL_MAX points (beyond that they are in the hover), and in 2D
only where they do not run into each other (the others are in the hover).
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from playground.figures.common import distinguish, fixed, layout, scrolls

LABEL_MAX = 300       # text labels on the points up to this many; hover only beyond
LABEL_MAX_3D = 80     # in 3D labels pile up in depth sooner: up to this many, smaller (hover beyond)
# A 2D plot's labels are spaced for a plot this wide and high (px) in this type, a projector's at 1280 px in lecture
# mode: a label that would touch one already placed is left to the hover (63 words' labels ran into each other)
LABEL_ROOM = (950, 400, 16)
WEBGL_MIN = 1_000     # a 2D scatter of more points is drawn with WebGL
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22"]
METHOD_LABELS = {"pca": "PCA", "tsne": "t-SNE", "umap": "UMAP"}


def _hover(values: np.ndarray | None, i: int, extra: str) -> str:
    """The first coordinates of a point's original vector, for the hover box."""
    if values is None:
        return extra
    v = values[i]
    shown = ", ".join(f"{x:+.3f}" for x in v[:6])
    more = f", … ({len(v)} dims)" if len(v) > 6 else ""
    return f"{extra}<br>vector: [{shown}{more}]" if extra else f"vector: [{shown}{more}]"


def spaced_labels(words: list[str], coords: np.ndarray) -> list[bool]:
    """Which points of a 2D scatter keep their label (drawn above the point, as scatter_figure does): in the words'
    order, each whose label would not touch a label kept already, on a plot of LABEL_ROOM."""
    width, height, size = LABEL_ROOM
    span = np.ptp(coords[:, :2], axis=0) if len(coords) else np.ones(2)
    scale = np.array([width, -height]) / np.maximum(span, 1e-9)      # px per unit; y grows downwards on screen
    kept: list[tuple[float, float, float, float]] = []
    shown = []
    for word, (x, y) in zip(words, coords[:, :2] * scale):
        half = 0.3 * size * len(word)                                   # a character is about 0.6 em wide
        box = (x - half, y - 1.3 * size - 6, x + half, y - 6)
        free = all(box[2] <= k[0] or k[2] <= box[0] or box[3] <= k[1] or k[3] <= box[1] for k in kept)
        shown.append(free)
        if free:
            kept.append(box)
    return shown


def scatter_figure(words: list[str], coords: np.ndarray, groups: list[str], title: str,
                   vectors: np.ndarray | None = None, notes: dict[str, str] | None = None) -> go.Figure:
    """coords (n, 2|3): one trace per group (its own colour, in the legend), each point labelled by its word
    and hovering its group, its coordinates and the start of its vector."""
    n, dims = coords.shape
    notes = notes or {}
    members: dict[str, list[int]] = {}
    for i, group in enumerate(groups):
        members.setdefault(group, []).append(i)
    shown = spaced_labels(words, coords) if dims == 2 else None
    traces = []
    for g_i, (group, idx) in enumerate(members.items()):
        colour = COLOURS[g_i % len(COLOURS)]
        hover = [f"<b>{html.escape(words[i])}</b> ({html.escape(group)})<br>"
                 + _hover(vectors, i, html.escape(notes.get(words[i], ""))) for i in idx]
        labelled = n <= (LABEL_MAX_3D if dims == 3 else LABEL_MAX)
        trace = dict(name=group, text=[words[i] for i in idx], hovertext=hover, hoverinfo="text",
                     mode="markers+text" if labelled else "markers", textposition="top center",
                     textfont=dict(size=12),
                     x=coords[idx, 0].tolist(), y=coords[idx, 1].tolist())
        if dims == 3:
            traces.append(dict(type="scatter3d", z=coords[idx, 2].tolist(),
                               marker=dict(size=5 if labelled else 4, color=colour), **trace))
        else:
            # WebGL only where SVG would be slow: each WebGL plot holds a context, and a browser keeps 16 at most.
            # A label left to the hover is drawn empty; its word stays the point's text (the text alternative's)
            traces.append(dict(type="scattergl" if n > WEBGL_MIN else "scatter",
                               texttemplate=["%{text}" if shown[i] else "" for i in idx],
                               marker=dict(size=6 if n > LABEL_MAX else 9, color=colour), **trace))
    extra = {}
    if dims == 3:
        # a projection's axes have no names worth a label (the title says which projection); the box a little
        # flatter than a cube (the figure is wide), the camera a little closer than plotly's default and aimed a
        # little lower: the cloud fills the figure, the box's lower corner still inside it (measured at 1280 px)
        bare = dict(title=dict(text=""))
        extra["scene"] = dict(xaxis=bare, yaxis=bare, zaxis=bare, aspectmode="manual",
                              aspectratio=dict(x=1.2, y=1.2, z=0.9),
                              camera=dict(eye=dict(x=1.45, y=1.45, z=0.9), center=dict(x=0, y=0, z=-0.12)))
    # the traces are built here from checked arrays: plotly's per-element validation (most of the time of a
    # 10,000-point figure) is skipped
    fig = go.Figure(data=traces, layout=layout(title=dict(text=title), height=560,
                                               legend=dict(itemsizing="constant"), **extra), _validate=False)
    return distinguish(fig)   # a group's points by their shape too, not only their colour


CELL_TEXT_MAX = 8  # a similarity heatmap prints its values in the cells up to this many rows (else: on hover)


def similarity_figure(labels: list[str], sim: np.ndarray, title: str, max_label: int = 32) -> go.Figure:
    """A cosine similarity heatmap (n, n), diverging around 0, values on hover, and in the cells (two decimals,
    as text: float32 would print 0.6800000071525574) while they are large enough to read."""
    short = [s if len(s) <= max_label else s[: max_label - 1] + "…" for s in labels]
    n = len(labels)
    cells = n <= CELL_TEXT_MAX
    idx = list(range(n))  # numeric axes: equal labels stay apart, and every row gets its tick
    full = [[f"{html.escape(labels[i])}<br>{html.escape(labels[j])}" for j in idx] for i in idx]
    # the cells' font is plotly's own choice, the largest that fits the narrowest cell as drawn (measured in the
    # page, at any width, up to the layout's font): a fixed size ran the numbers together in a narrow column
    fig = go.Figure(go.Heatmap(z=sim, x=idx, y=idx, zmin=-1, zmax=1, colorscale="RdBu", reversescale=True,
                               text=[[fixed(v) for v in row] for row in np.asarray(sim)] if cells else None,
                               texttemplate="%{text}" if cells else None, customdata=full,
                               hovertemplate="%{customdata}<br>cosine %{z:.3f}<extra></extra>"))
    ticks = dict(tickmode="array", tickvals=idx, showgrid=False)
    fig.update_layout(**layout(title=dict(text=title), height=max(360, 26 * n + 140),
                               xaxis=dict(ticktext=[str(i + 1) for i in idx], **ticks),
                               yaxis=dict(autorange="reversed", ticktext=[html.escape(s) for s in short], **ticks),
                               margin=dict(l=10, r=10, t=50, b=10)))
    return fig


def table_html(columns: list[str], rows: list[list], row_labels: list[str], caption: str = "",
               max_cols: int = 40, digits: int = 2) -> str:
    """A plain HTML table (numbers rounded, zeros greyed), cut to max_cols columns with a note."""
    cut = len(columns) > max_cols
    columns = columns[:max_cols]
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = []
    for label, row in zip(row_labels, rows):
        cells = []
        for value in row[:max_cols]:
            if isinstance(value, float):
                text = f"{value:.{digits}f}" if value else "0"
            else:
                text = str(value)
            style = ' class="emb-zero"' if value == 0 else ""
            cells.append(f"<td{style}>{text}</td>")
        body.append(f"<tr><th>{html.escape(label)}</th>{''.join(cells)}</tr>")
    note = f"<p><em>First {max_cols} columns shown; the JSON has all of them.</em></p>" if cut else ""
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return (f'<div class="emb-table" {scrolls(caption or "table")}><table>{cap}<tr><th></th>{head}</tr>'
            f'{"".join(body)}</table></div>{note}')


def neighbours_html(rows: list[dict], title: str) -> str:
    """rows: [{word, neighbours: [[word, score], ...]}] as a table, one line per word."""
    if not rows:
        return ""
    lines = []
    for r in rows:
        cells = " · ".join(f"{html.escape(w)} <small>{fixed(s)}</small>" for w, s in r["neighbours"])
        lines.append(f"<tr><th>{html.escape(r['word'])}</th><td>{cells}</td></tr>")
    return (f'<div class="emb-table" {scrolls(title)}><table><caption>{html.escape(title)}</caption>'
            f'{"".join(lines)}</table></div>')


def search_html(query: str, hits: list[dict]) -> str:
    if not hits:
        return ""
    items = "".join(f"<li><b>{h['score']:.3f}</b> {html.escape(h['sentence'])}</li>" for h in hits)
    return f"<p>Nearest to <em>{html.escape(query)}</em>:</p><ol>{items}</ol>"


def word_space_title(data: dict) -> str:
    """The scatter's title from embed_words' data: how many words, where, how projected."""
    title = f"{len(data['points']):,} words, {data['source']}, {METHOD_LABELS[data['method']]} {data['dims']}D"
    info = data["projection"]
    if data["method"] == "pca":
        title += f" ({100 * sum(info['explained_variance_ratio']):.0f}% of the variance)"
    elif data["method"] == "tsne" and "seed" in info:
        title += f" (perplexity {info['perplexity']:g}, seed {info['seed']})"
    elif "seed" in info:
        title += f" (k = {info['n_neighbors']}, min_dist {info['min_dist']:g}, seed {info['seed']})"
    return title


def neighbours_caption(data: dict) -> str:
    """The neighbours table's caption; it says when the table covers only some words, which (the selected word
    first, then the first ones), and where the others are (here, not in a pop-up, which would nag on every page
    load)."""
    caption = f"Nearest neighbours by cosine in {data['source']} (the word itself first, at 1.00)"
    shown, n = len(data["neighbours"]), len(data["points"])
    if n > shown:
        selected = any(p.get("set") == "selected" for p in data["points"])
        caption += (f"; {shown} of {n:,} words, the selected word first" if selected
                    else f"; the first {shown} of {n:,} words") + " (all are in the plot; pick any word below)"
    return caption


def analogy_md(data: dict) -> str:
    """The analogy's answers as a Markdown table."""
    q = data["query"]
    lines = "\n".join(f"| {i + 1} | **{r['word']}** | {r['score']:.3f} |" for i, r in enumerate(data["answers"]))
    return (f"**{q[0]} − {q[1]} + {q[2]}** in {data['source']} (cosine with the unit-length sum; the three inputs "
            f"are excluded, as in Mikolov et al. 2013):\n\n| rank | word | cosine |\n|---|---|---|\n{lines}")


def contextual_md(data: dict, sim: np.ndarray, in_word2vec: bool | None) -> str:
    """How far apart one word's vectors are across the sentences, against word2vec's single vector."""
    word, layer = data["word"], data["layer"]
    single = (f"word2vec has one vector for **{word.lower()}** whatever the sentence: every cosine would be 1.00."
              if in_word2vec else f"word2vec has no vector for {word!r}." if in_word2vec is not None else "")
    off = sim[~np.eye(len(sim), dtype=bool)]
    where = "input embeddings + positions" if layer == 0 else f"after block {layer}"
    which = f"layer {layer} ({where})"
    if data["model"] == "elmo":
        which = elmo_layer_md(layer, data.get("mix"))
    return (f"{data['model']}, {which}: the cosines between the {len(sim)} occurrences range from "
            f"{fixed(off.min())} to {fixed(off.max())}. {single}")


def elmo_layer_md(layer, mix: dict | None) -> str:
    """What an ELMo layer is: the token layer, a biLSTM layer, or eq. 1's mix with its weights."""
    if layer == "mix":
        weights = ", ".join(f"{w:.2f}" for w in mix["softmax_s"])
        return f"the mix of eq. 1 (γ = {mix['gamma']:g} × Σ_j softmax(s)_j h_j with softmax(s) = ({weights}))"
    return "layer 0 (the token layer [x; x], the same in every context)" if layer == 0 else \
        f"layer {layer} (biLSTM layer {layer}: [forward h; backward h])"


def classic_md(same_bag: list[tuple[int, int]], disjoint: list[tuple[int, int]]) -> str:
    """What one-hot, bag of words and TF-IDF miss, shown on the user's own sentences when they can be."""
    md = ["**What they miss.**"]
    if same_bag:
        md.append(f"Sentences {', '.join(f'{a} and {b}' for a, b in same_bag[:5])} have the same bag of words "
                  "(cosine 1.00): word order is gone.")
    else:
        md.append("Word order: reorder a sentence's words and its bag of words does not change.")
    if disjoint:
        md.append(f"Sentences {', '.join(f'{a} and {b}' for a, b in disjoint[:5])} share no word, so their count "
                  "vectors have cosine 0, however close their meaning (synonyms are different columns).")
    return " ".join(md)
