"""Figures of the Real vocabularies view (Tokenization tab), from analysis/vocabularies.py's data, each with its text
alternative made from the same numbers:

- `premium_figure`: the premium of every language in every vocabulary, a heatmap (languages × vocabularies), each cell
  written ("×2.31") and its tokens, bytes per token and tokens per word on hover;
- `premium_markdown`: the same table in full, as Markdown (the text alternative, with the definitions);
- `text_markdown`: the student's text in each vocabulary: tokens, bytes per token, tokens per word.
The tokens over the student's text are figures/tokenization.tokens_html's, as in Compare tokenizers.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

from playground.figures.common import layout, plural

SCALE = [[0.0, "#f7fbff"], [0.25, "#c6dbef"], [0.5, "#6baed6"], [0.75, "#2171b5"], [1.0, "#08306b"]]


def _number(x, digits: int = 2) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def _rows(sample: dict) -> dict[tuple[str, str], dict]:
    return {(r["vocabulary"], r["language"]): r for r in sample["rows"]}


def _language(lang: dict) -> str:
    return f"{lang['name']} ({lang['script']})"


def premium_figure(sample: dict) -> go.Figure:
    """Languages down, vocabularies across, the premium in each cell (1 for English, by definition)."""
    rows, langs, vocabs = _rows(sample), sample["languages"], sample["vocabularies"]
    z = [[rows[v["key"], lang["key"]]["premium"] for v in vocabs] for lang in langs]
    hover = [[_hover(rows[v["key"], lang["key"]], lang, v) for v in vocabs] for lang in langs]
    fig = go.Figure(go.Heatmap(
        z=z, x=[v["label"] for v in vocabs], y=[_language(lang) for lang in langs],
        text=[[f"×{p:.2f}" for p in row] for row in z], texttemplate="%{text}", textfont=dict(size=13),
        customdata=hover, hovertemplate="%{customdata}<extra></extra>",
        colorscale=SCALE, zmin=1, colorbar=dict(title=dict(text="premium"), thickness=12),
    ), layout=layout(
        title=dict(text="The premium: tokens for the same declaration, relative to English"),
        xaxis=dict(side="top", title=dict(text="")), yaxis=dict(autorange="reversed", dtick=1),
        height=120 + 30 * len(langs), margin=dict(l=10, r=10, t=90, b=20),
    ))
    return fig


def _hover(row: dict, lang: dict, vocab: dict) -> str:
    per_word = (f"{_number(row['tokens_per_word'])} tokens per {_unit(lang)}" if row["tokens_per_word"] is not None
                else f"{_number(row['tokens_per_char'], 3)} tokens per character (no spaces between words)")
    return (f"{html.escape(_language(lang))}, {html.escape(vocab['label'])}<br>{plural(row['tokens'], 'token')}: "
            f"×{row['premium']:.2f} English's<br>{_number(row['bytes_per_token'])} bytes per token<br>{per_word}")


def _unit(lang: dict) -> str:
    spaces = lang["spaces_separate"] or ""
    return "word" if spaces == "words" else spaces.split(" ")[0].rstrip("s") or "word"


def premium_markdown(sample: dict) -> str:
    """The text alternative: every language in every vocabulary, all the figures, then what each one means."""
    rows, vocabs = _rows(sample), sample["vocabularies"]
    head = "| language | script | " + " | ".join(
        f"{v['label']}: premium · tokens · tokens/word · bytes/token" for v in vocabs) + " |"
    lines = [head, "|" + " --- |" * (2 + len(vocabs))]
    for lang in sample["languages"]:
        cells = []
        for v in vocabs:
            r = rows[v["key"], lang["key"]]
            per_word = (_number(r["tokens_per_word"]) if r["tokens_per_word"] is not None
                        else f"– ({_number(r['tokens_per_char'], 3)}/char)")
            cells.append(f"×{r['premium']:.2f} · {r['tokens']:,} · {per_word} · {_number(r['bytes_per_token'])}")
        unit = "" if lang["spaces_separate"] in ("words", None) else f" (spaces separate {lang['spaces_separate']})"
        lines.append(f"| {lang['name']}{unit} | {lang['script']} | " + " | ".join(cells) + " |")
    definitions = "\n".join(f"- **{name.replace('_', ' ')}**: {meaning}." for name, meaning
                            in sample["definitions"].items())
    used = "; ".join(f"{v['label']}: {v['used_by']}" for v in vocabs)
    return (f"{chr(10).join(lines)}\n\n{definitions}\n\nThe vocabularies: {used}.\n\n"
            f"The sample: {sample['source']}. {sample['licence']}")


def text_markdown(data: dict) -> str:
    """The student's text in each vocabulary, as a table (tokens per word: per space-separated unit of the text)."""
    results = data["tokenizers"]
    if not results:
        return "No vocabulary is available here."
    lines = ["| vocabulary | used by | tokens | bytes/token | tokens/word |", "| --- | --- | --- | --- | --- |"]
    for r in results.values():
        lines.append(f"| {r['label']} | {r['used_by']} | {r['n_tokens']:,} | {_number(r['bytes_per_token'])} | "
                     f"{_number(r['tokens_per_word'])} |")
    return (f"Your text: {plural(data['n_chars'], 'character')}, {plural(data['n_bytes'], 'UTF-8 byte')}.\n\n"
            + "\n".join(lines))
