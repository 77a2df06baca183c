"""What every tab's figures share: the palette, the plotly layout, and how a token is shown.

Figure builders take arrays and labels and return plotly figures or HTML; no torch, no gradio. HTML is built
with every piece of user text escaped; the CSS classes live in assets/style.css.
"""

from __future__ import annotations

import html
import json
import math
import unicodedata

from playground.text import token_label  # noqa: F401  (a token as the figures show it)


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


# Second channels beside colour, in the order series get them (plotly's names; 3D markers have fewer shapes)
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star", "cross", "triangle-down", "pentagon", "hexagon",
           "triangle-left", "triangle-right")
SYMBOLS_3D = ("circle", "square", "diamond", "x", "cross", "circle-open", "square-open", "diamond-open")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
# a bar's pattern over its colour, then the pattern drawn in its colour on white (plotly has eight shapes)
PATTERNS = tuple((shape, "overlay") for shape in ("", "/", ".", "x", "\\", "-", "|", "+")) + \
    tuple((shape, "replace") for shape in ("/", ".", "x", "\\", "-", "|", "+"))


def distinguish(fig):
    """`fig` with its series told apart by more than their colour (WCAG 1.4.1: a colour-blind reader matches a
    series to its legend entry by its marker, dash or bar pattern too). Within each subplot, the series of one kind
    that look alike but for colour get a marker symbol each (lines and points), a dash each (lines without
    markers) or a fill pattern each (bars), one not taken there; a series met again in another subplot keeps its
    own (one legend entry, one look), and what the figure set itself (the classifiers' dashes, a star) is kept.
    Returns `fig`."""
    groups: dict[tuple, list] = {}
    for trace in fig.data:
        kind = _kind(trace)
        if kind:
            groups.setdefault((kind, getattr(trace, "xaxis", None), getattr(trace, "yaxis", None)), []).append(trace)
    chosen: dict[tuple, object] = {}   # (kind, series) -> the symbol, dash or pattern it was given
    for (kind, _, _), traces in groups.items():
        looks = [_look(trace, kind) for trace in traces]
        alike = [trace for trace, look in zip(traces, looks) if looks.count(look) > 1]
        taken = {_channel(trace, kind) for trace, look in zip(traces, looks) if looks.count(look) == 1}
        for trace in alike:
            series = (kind, trace.name or id(trace))
            if series not in chosen:
                chosen[series] = next((v for v in _CHANNELS[kind] if v not in taken), _CHANNELS[kind][0])
            taken.add(chosen[series])
            _set_channel(trace, kind, chosen[series])
    return fig


def _kind(trace) -> str | None:
    mode = getattr(trace, "mode", None) or ""
    if trace.type == "bar":
        return "bar"
    if trace.type in ("scatter", "scattergl", "scatter3d"):
        return ("points3d" if trace.type == "scatter3d" else "points") if "markers" in mode else "lines"
    return None


_CHANNELS = {"bar": PATTERNS, "lines": DASHES, "points": SYMBOLS, "points3d": SYMBOLS_3D}


def _look(trace, kind: str) -> tuple:
    """What tells `trace` apart from the others of its kind, but its colour: its channel, and a line's dash."""
    return (None if kind == "bar" else trace.line.dash or "solid", _channel(trace, kind))


def _channel(trace, kind: str):
    """The one channel distinguish sets for this kind, as the trace has it."""
    if kind == "bar":
        pattern = trace.marker.pattern
        return (pattern.shape, pattern.fillmode or "overlay") if pattern.shape else ("", "overlay")
    return trace.line.dash or "solid" if kind == "lines" else trace.marker.symbol or "circle"


def _set_channel(trace, kind: str, value) -> None:
    if kind == "bar":
        trace.marker.pattern.shape, trace.marker.pattern.fillmode = value
    elif kind == "lines":
        trace.line.dash = value
    else:
        trace.marker.symbol = value
        if trace.marker.size is None and kind == "points":   # plotly's 6 px leaves a pentagon a dot
            trace.marker.size = 8


def plural(n: int, word: str, many: str = "") -> str:
    """A count with its noun: "1 token", "2 tokens", "1,024 tokens"."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def fixed(x: float, digits: int = 2) -> str:
    """x with `digits` decimals, never "-0.00": a value that rounds to zero has no sign."""
    text = f"{x:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def count_axis(top: float, most: int = 8) -> dict:
    """An axis of counts: ticks on whole numbers only (plotly puts them at 0.5 for small counts), at most `most`."""
    return dict(tick0=0, dtick=max(1, math.ceil(top / most)))


def row_labels(n: int, plot_px: float, largest: int = 13, smallest: int = 8) -> dict:
    """A category axis of n rows sharing plot_px pixels: every row labelled (dtick 1) in the largest font that
    fits a row (a line is about 1.25 times the font size), or, when even the smallest does not fit, plotly's
    own choice of rows in the smallest font."""
    size = math.floor(plot_px / max(n, 1) / 1.25)
    if size < smallest:
        return dict(tickfont=dict(size=smallest))
    return dict(dtick=1, tickfont=dict(size=min(size, largest)))


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


def warm() -> None:
    """Import what plotly loads on its first figure of each kind (its property validators: about 3 s of CPU on the
    first figure a process draws). A server calls it before it forks its compute processes (playground/ui/compute.py),
    so that neither pays it again on a student's first question."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    traces = [go.Bar(x=[1], y=[1]), go.Scatter(x=[1], y=[1]), go.Scattergl(x=[1], y=[1]), go.Heatmap(z=[[1]]),
              go.Scatter3d(x=[1], y=[1], z=[1])]
    for trace in traces:
        go.Figure(trace, layout=layout()).to_json()
    make_subplots(rows=1, cols=2, subplot_titles=["a", "b"]).to_json()


def scrolls(name: str) -> str:
    """The attributes of a table that may scroll sideways: a focusable region, so a keyboard can scroll it
    (WCAG 2.1.1; axe's scrollable-region-focusable)."""
    return f'tabindex="0" role="region" aria-label="{html.escape(name, quote=True)}"'


def plot_stale_js(elem_id: str, what: str, button: str) -> str:
    """A figure that carries no inputs (a plotly plot): when one of its inputs changes, dim it under a note (if it
    shows anything yet); `plot_fresh_js` clears that when the figure is drawn again."""
    return f"""() => {{
  const box = document.getElementById({json.dumps(elem_id)}), plot = box && box.querySelector('.plot-container');
  if (!plot) return [];
  plot.style.opacity = '0.45';
  if (!box.querySelector(':scope > .plot-stale')) {{
    const note = document.createElement('div');
    note.className = 'notice plot-stale';
    note.textContent = {json.dumps(f"Out of date: {what} changed since this was drawn; press {button}.")};
    box.prepend(note);
  }}
  return [];
}}"""


def plot_fresh_js(elem_id: str) -> str:
    return f"""() => {{
  const box = document.getElementById({json.dumps(elem_id)});
  box?.querySelector(':scope > .plot-stale')?.remove();
  const plot = box && box.querySelector('.plot-container');
  if (plot) plot.style.opacity = '';
  return [];
}}"""
