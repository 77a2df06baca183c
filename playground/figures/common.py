"""What every tab's figures share: the palette, the plotly layout, and how a token is shown.

Figure builders take arrays and labels and return plotly figures or HTML; no torch, no gradio. HTML is built
with every piece of user text escaped; the CSS classes live in assets/style.css.
"""

from __future__ import annotations

import html
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
