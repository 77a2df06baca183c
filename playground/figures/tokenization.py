"""Figures of the Tokenization tab: tokens over the text, counts, classic BPE step by step, why WordPiece and
Unigram split a word, normalisation."""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go

from playground.figures.common import (ACCENT, MUTED, PALETTE_SIZE, count_axis, layout, plural, scrolls,
                                       token_label, visible)

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


def tokens_html(data: dict) -> str:
    """Every tokenizer's split of one text, one row each, with its counts and ids (`data` as
    analysis.tokenization.compare gives it)."""
    text = data["text"]
    rows = [f'<div class="notice">{html.escape(n)}</div>' for n in data["notices"]]
    if not text:
        rows.append('<div class="notice">Type or paste some text above to see how each tokenizer splits it.</div>')
    for key, result in data["tokenizers"].items():
        stats = (f"{plural(result['n_tokens'], 'token')} · {_number(result['chars_per_token'])} chars/token · "
                 f"{_number(result['n_unknown'])} unknown · vocabulary {_number(result['vocab_size'])}")
        ids = " ".join(str(i) for i in result["ids"])
        rows.append(
            f'<div class="tok-row" data-key="{html.escape(key)}">'
            f'<div class="tok-head"><span class="tok-name">{html.escape(result["label"])}</span>'
            f'<span class="tok-stats">{stats}</span></div>'
            f'<div class="tok-text" dir="auto" tabindex="0" role="group" aria-label="{html.escape(result["label"])} '
            f'tokens: arrow keys move from token to token">{token_spans_html(text, result)}</div>'
            f'<details class="tok-ids"><summary>ids</summary><code>{ids}</code></details></div>'
        )
    info = '<div class="kb-info" aria-live="polite"></div>'  # what a focused token shows (TOKEN_HOVER_JS)
    return f'<div class="tok-compare">{info}{"".join(rows)}</div>'


# Hover a token: every token of every tokenizer that covers one of the same characters lights up. The keyboard
# does the same: Tab reaches a tokenizer's row, the arrow keys move from token to token (each focused in turn), and
# focus lights up what hover does and says the token's tooltip in words above the rows (.kb-info, read aloud).
TOKEN_HOVER_JS = """
const light = (tok) => {
  element.querySelectorAll('.tok.hl').forEach((el) => el.classList.remove('hl'));
  if (!tok) return;
  const s = +tok.dataset.s, e = +tok.dataset.e;
  element.querySelectorAll('.tok').forEach((el) => {
    if (+el.dataset.s < e && +el.dataset.e > s) el.classList.add('hl');
  });
};
element.addEventListener('mouseover', (event) => light(event.target.closest('.tok')));
element.addEventListener('mouseleave', () => light(null));
element.addEventListener('focusin', (event) => {
  const tok = event.target.closest('.tok'), info = element.querySelector('.kb-info');
  light(tok);
  if (info) info.textContent = tok ? tok.closest('.tok-row').querySelector('.tok-name').textContent + ': '
    + tok.title.replace(/\\n/g, '; ') : '';
});
element.addEventListener('keydown', (event) => {
  const row = event.target.closest('.tok-text'), step = {ArrowRight: 1, ArrowLeft: -1}[event.key];
  if (!row || !step) return;
  event.preventDefault();
  const toks = [...row.querySelectorAll('.tok')], at = toks.indexOf(event.target.closest('.tok'));
  const next = toks[at < 0 ? (step > 0 ? 0 : toks.length - 1) : Math.max(0, Math.min(toks.length - 1, at + step))];
  if (next) { next.tabIndex = -1; next.focus(); }
});
"""


def token_count_figure(results: dict[str, dict]) -> go.Figure:
    """Tokens needed for the same text by each tokenizer (`results`: key -> its `encode` and label),
    with characters per token on hover."""
    keys = list(results)
    fig = go.Figure(go.Bar(
        x=[results[k]["n_tokens"] for k in keys],
        y=[results[k]["label"] for k in keys],
        orientation="h",
        text=[f"{plural(results[k]['n_tokens'], 'token')}, {_number(results[k]['chars_per_token'])} chars/token"
              for k in keys],
        textposition="auto",
        marker_color=[ACCENT if results[k]["n_unknown"] else "#4a7bd0" for k in keys],
        customdata=[plural(results[k]["n_tokens"], "token") for k in keys],
        hovertemplate="%{y}: %{customdata}<extra></extra>",
    ), layout=layout(
        title=dict(text="Sequence length: the same text in each tokenizer (red: some tokens unknown)"),
        xaxis=dict(title=dict(text="tokens")), yaxis=dict(autorange="reversed", dtick=1), height=90 + 40 * len(keys),
    ))
    return fig


def token_characters(text: str, offsets: list[list[int]]) -> list[str]:
    """The characters each token adds to the text, each character once. The byte-level pieces of one character all
    carry its span, so a token whose span the next token still overlaps adds only what lies before the next one
    starts; the piece that completes the character adds it (as incremental decoding shows it: "", then 👋)."""
    out, cursor = [], 0
    for i, (start, end) in enumerate(offsets):
        following = offsets[i + 1][0] if i + 1 < len(offsets) else end
        stop = min(end, following) if following < end else end  # the next token overlaps: the character is not done
        start = max(start, cursor)
        out.append(text[start:stop] if stop > start else "")
        cursor = max(cursor, stop)
    return out


def tokens_table(data: dict) -> pd.DataFrame:
    """One row per token of every tokenizer, with the characters it adds to the text (`token_characters`)."""
    text = data["text"]
    rows = [
        (r["label"], i, token_label(token), tid, start, end, token_label(chars), unk)
        for r in data["tokenizers"].values()
        for i, (token, tid, (start, end), unk, chars) in enumerate(zip(
            r["tokens"], r["ids"], r["offsets"], r["unknown"], token_characters(text, r["offsets"])))
    ]
    return pd.DataFrame(rows, columns=["tokenizer", "#", "token", "id", "start", "end", "characters", "unknown"])


# ---------------------------------------------------------------------------------------------
# Classic BPE, step by step


def merges_table(trace: dict) -> pd.DataFrame:
    """The merges learned by analysis.subwords.bpe_trace, in order."""
    return pd.DataFrame(
        [(m["step"], f"{m['pair'][0]} + {m['pair'][1]}", m["new_symbol"], m["count"]) for m in trace["merges"]],
        columns=["step", "pair", "new symbol", "count"],
    )


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
    data, counts = [], [1]
    if 1 <= step <= len(trace["steps"]):
        state = trace["steps"][step - 1]
        labels = [f"{a} + {b}" for a, b, _ in state["pair_counts"]]
        chosen = f"{state['pair'][0]} + {state['pair'][1]}"
        counts = [n for _, _, n in state["pair_counts"]] or [1]
        data.append(go.Bar(
            x=[n for _, _, n in state["pair_counts"]], y=labels, orientation="h",
            marker_color=[ACCENT if label == chosen else MUTED for label in labels],
            hovertemplate="%{y}: %{x}<extra></extra>",
        ))
        title = f"Step {step}: the top pair counts ({state['n_pairs']:,} distinct pairs)"
    else:
        title = "Step 0: no merge yet; move the step slider"
    return go.Figure(data, layout=layout(
        title=dict(text=title),
        xaxis=dict(title=dict(text="count (weighted by word frequency)"), **count_axis(max(counts))),
        yaxis=dict(autorange="reversed", dtick=1), height=360,   # every pair labelled (ten at most)
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
        rows.append(f'<div class="seg-row"><b>{html.escape(item["word"])}</b> → '
                    f'{chips(item["pieces"], classes="chip final")}'
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
            delta = ("best: the tokenizer's output" if rank == 0 else
                     f"{seg['total'] - best:+.2f} (× {pow(2.718281828, seg['total'] - best):.2g} as probable)")
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
    """Each stage a row of tokens (changed ones marked, removed ones struck through); the lemmatizer's row carries
    each word's part of speech as a subscript and says which stage it read."""
    rows = []
    for stage in stages:
        changed = set(stage["changed"])
        pos = stage.get("pos") or [None] * len(stage["tokens"])
        tokens = "".join(
            f'<span class="chip{" new" if i in changed else ""}">{html.escape(t)}'
            f'{f"<sub>{p}</sub>" if p else ""}</span>'
            for i, (t, p) in enumerate(zip(stage["tokens"], pos))
        )
        if stage.get("from"):
            tokens += f' <span class="tok-stats">(reads the {html.escape(stage["from"])} stage, beside stemming)</span>'

        removed = "".join(f'<span class="chip removed">{html.escape(t)}</span>' for t in stage["removed"])
        removed = f'<div class="norm-removed">removed: {removed}</div>' if removed else ""
        rows.append(
            f'<div class="norm-row"><div class="tok-head"><span class="tok-name">{html.escape(stage["label"])}</span>'
            f'<span class="tok-stats">{plural(stage["n_tokens"], "token")} · {stage["n_types"]} distinct</span></div>'
            f"<div>{tokens or '<i>nothing left</i>'}</div>{removed}</div>"
        )
    return "".join(rows)


POS_NAMES = {"n": "noun", "v": "verb", "a": "adjective", "r": "adverb", None: "not in WordNet"}


def lemma_table_html(data: dict) -> str:
    """The lecture's two rows as a table, one column per word: the word, the Porter stem, the part of speech used
    and the WordNet lemma, then the lemma under each part of speech. The table is its own text alternative."""
    rows = data["rows"]
    if not rows:
        return "<p><i>No words to lemmatize.</i></p>"
    cell = lambda v, tag="td": f"<{tag}>{html.escape(str(v))}</{tag}>"  # noqa: E731
    lines = [("word", [r["word"] for r in rows], "th"), ("Porter stem", data["stems"], "td"),
             ("part of speech", [POS_NAMES[r["pos"]] for r in rows], "td"),
             ("WordNet lemma", data["lemmas"], "td")]
    lines += [(f"lemma as {POS_NAMES[p]}", [r["lemmas"][p] for r in rows], "td") for p in ("n", "v", "a", "r")]
    body = "".join(f'<tr><th scope="row">{name}</th>{"".join(cell(v, tag) for v in values)}</tr>'
                   for name, values, tag in lines)
    caption = ("each word's part of speech guessed from WordNet's tag counts" if data["mode"] == "auto"
               else f"every word read as a {POS_NAMES[data['mode']]}")
    return (f'<div class="emb-table" {scrolls("Stemming and lemmatization")}><table><caption>Stemming and '
            f'lemmatization: {html.escape(caption)}</caption>'
            f"{body}</table></div>")
