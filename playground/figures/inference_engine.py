"""Figures of the Inference tab's KV cache and Batching views: the cache's bytes as the text grows and a step's time
with and without it; the engine's live batch; step time and tokens a second against the batch size.

Each figure has a text alternative built from the same data (a Markdown summary and table), shown beside it.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from playground.figures.common import ACCENT, distinguish, layout, plural, token_label

CACHE, MHA, NO_CACHE, TURN = "#4c72b0", "#8172b2", "#c44e52", "#55a868"


def size(n: float) -> str:
    """Bytes as people read them: 46,080 B, 2.1 MB, 377 MB (decimal units)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n):,} B"


def quoted(text: str) -> str:
    """Generated text inside Markdown: whitespace made visible (↵, ·), markup characters escaped."""
    out = token_label(str(text))
    for ch in "\\`*_{}[]<>()#+!|~":
        out = out.replace(ch, "\\" + ch)
    return out or "∅"


def _title(text: str) -> dict:
    return dict(text=text, font=dict(size=15))


# ---------------------------------------------------------------------------------------------
# KV cache


def kv_growth_figure(data: dict) -> go.Figure:
    """The cache's bytes (its tensors' nbytes) after each token seen; for grouped-query attention, what a multi-head
    cache would hold; where the second turn's reuse ends and where the window slides."""
    g, group = data["growth"], data["gqa"]["group"]
    fig = go.Figure(go.Scatter(x=g["seen"], y=[b / 1e6 for b in g["bytes"]], mode="lines+markers", name="KV cache",
                               line=dict(color=CACHE), marker=dict(size=4),
                               hovertemplate="%{x} tokens seen: %{y:.3f} MB<extra></extra>"))
    if group > 1:
        fig.add_trace(go.Scatter(x=g["seen"], y=[group * b / 1e6 for b in g["bytes"]], mode="lines",
                                 name=f"multi-head ({group}× the heads)", line=dict(color=MHA, dash="dash"),
                                 hovertemplate="%{x} tokens: %{y:.3f} MB with one kv head per query head"
                                               "<extra></extra>"))
    turn = data["second_turn"]
    if turn["reused"]:
        fig.add_trace(go.Scatter(x=[turn["reused"]], y=[turn["bytes_reused"] / 1e6], mode="markers",
                                 name="reused by the second turn", marker=dict(color=TURN, size=12, symbol="star"),
                                 hovertemplate="%{x} positions reused: %{y:.3f} MB<extra></extra>"))
    window = data["window"]
    if window["slid_from"]:
        fig.add_vline(x=window["n_positions"], line=dict(color=ACCENT, dash="dot"),
                      annotation_text=f"window: {window['n_positions']} tokens", annotation_position="top left")
    s = data["shape"]
    fig.update_layout(**layout(title=_title(f"{data['label']}: {size(data['bytes_per_token'])} a token "
                                            f"({s['n_layer']} layers × 2 × {s['n_kv_head']} kv heads × "
                                            f"{s['head_dim']} × {s['itemsize']} bytes)"),
                               height=360, xaxis=dict(title="tokens seen"), yaxis=dict(title="MB", rangemode="tozero"),
                               legend=dict(orientation="h", y=-0.25)))
    return distinguish(fig)


def kv_time_figure(data: dict) -> go.Figure:
    """Each generation step's time with the cache (one position), and the passes over the whole text without it
    (the prompt's, the second turn's, and for a small model some steps timed again without the cache); the second
    turn with its reuse."""
    steps = data["steps"]
    fig = go.Figure(go.Scatter(x=[s["seen"] for s in steps], y=[s["ms_cached"] for s in steps], mode="lines+markers",
                               name="a step with the cache", line=dict(color=CACHE),
                               hovertemplate="token %{x}: %{y:.1f} ms<extra></extra>"))
    turn = data["second_turn"]
    whole = sorted([(data["prompt_tokens"], data["prompt_ms"]), (turn["tokens"], turn["ms_full"])]
                   + [(s["seen"], s["ms_uncached"]) for s in steps if "ms_uncached" in s])
    fig.add_trace(go.Scatter(x=[x for x, _ in whole], y=[y for _, y in whole], mode="lines+markers",
                             name="without the cache (the whole text again)", line=dict(color=NO_CACHE),
                             hovertemplate="%{x} tokens: %{y:.1f} ms<extra></extra>"))
    fig.add_trace(go.Scatter(x=[turn["tokens"]], y=[turn["ms_reused"]], mode="markers",
                             name=f"second turn reusing the cache ({turn['computed']} new tokens)",
                             marker=dict(color=TURN, size=12, symbol="star"),
                             hovertemplate="%{x} tokens, %{text} computed: %{y:.1f} ms<extra></extra>",
                             text=[turn["computed"]]))
    fig.update_layout(**layout(title=_title("A step's time with and without the cache, measured now"), height=360,
                               xaxis=dict(title="tokens seen"), yaxis=dict(title="ms", type="log"),
                               legend=dict(orientation="h", y=-0.25)))
    return distinguish(fig)


def _layers_table(data: dict) -> list[str]:
    rows = data["layers"]
    shown = rows if len(rows) <= 4 else rows[:2] + rows[-1:]
    out = ["| layer | k | v | dtype | bytes | a token |", "|---|---|---|---|---|---|"]
    for r in shown:
        if len(rows) > 4 and r is rows[-1]:
            out.append(f"| … {len(rows) - 3} more, the same | | | | | |")
        out.append(f"| {r['layer']} | {tuple(r['k_shape'])} | {tuple(r['v_shape'])} | {r['dtype']} | {r['bytes']:,} "
                   f"| {r['bytes_per_token']:,} |")
    out.append(f"| **all** | | | | **{data['bytes']:,}** | **{data['bytes_per_token']:,}** |")
    return out


def kv_markdown(data: dict) -> str:
    """The view's text alternative: the cache's bytes, GQA's saving, the times, the second turn and the window."""
    s, q, t, w = data["shape"], data["gqa"], data["second_turn"], data["window"]
    steps = data["steps"]
    cached = sorted(x["ms_cached"] for x in steps if not x["slid"]) or [x["ms_cached"] for x in steps]
    uncached = [(x["seen"], x["ms_uncached"]) for x in steps if "ms_uncached" in x and not x["slid"]]
    lines = [f"**{data['label']}**, {plural(data['prompt_tokens'], 'prompt token')}: the cache holds "
             f"**{size(data['bytes'])}** ({data['bytes']:,} bytes, the tensors' `nbytes`), "
             f"**{data['bytes_per_token']:,} bytes a token**, {data['bytes_per_token_per_layer']:,} in each of its "
             f"{s['n_layer']} layers = 2 (k, v) × {s['n_kv_head']} kv heads × {s['head_dim']} × {s['itemsize']} "
             f"bytes ({s['dtype']}).", ""]
    if q["group"] > 1:
        lines += [f"**Grouped-query attention:** {s['n_head']} query heads read {s['n_kv_head']} key/value heads. A "
                  f"multi-head cache (one kv head per query head, the tensors its attention builds for every step) "
                  f"would hold {size(q['mha_bytes'])}: **{q['ratio']:g}× more**.", ""]
    else:
        lines += [f"Multi-head attention: each of the {s['n_head']} heads keeps its own keys and values.", ""]
    lines += [f"**A step with the cache** (one new position): median {cached[len(cached) // 2]:.1f} ms; **without**"
              f" (the whole text again): the prompt's pass {data['prompt_ms']:.0f} ms"
              + (f", {uncached[-1][1]:.0f} ms at {uncached[-1][0]} tokens" if uncached else "")
              + f", the second turn's {t['ms_full']:.0f} ms.", "",
              f"**Second turn** ({plural(t['tokens'], 'token')}): {t['reused']} reused from the cache "
              f"({size(t['bytes_reused'])}), {t['computed']} computed: {t['ms_reused']:.0f} ms, against "
              f"{t['ms_full']:.0f} ms for the whole conversation again; the next token is "
              f"{'the same' if t['same_next_token'] else 'another'} (largest logit difference "
              f"{t['max_logit_diff']:g})."]
    if t["engine_chunk"]:
        lines += [f"The class's engine keeps whole {t['engine_chunk']}-token chunks of prompts: it would reuse "
                  f"{t['engine_reused']} of these tokens."]
    lines += [""] + _window_lines(data, w) + ["", *_layers_table(data)]
    return "\n".join(lines)


def _window_lines(data: dict, w: dict) -> list[str]:
    if w["slid_from"]:
        slid = [x["ms_cached"] for x in data["steps"] if x["slid"]]
        return [f"**The window:** from token {w['slid_from']} on, past {w['n_positions']} positions, the window "
                f"slides: positions shift, so the cached keys no longer fit and each step computes all "
                f"{w['n_positions']} again ({len(slid)} steps, median {sorted(slid)[len(slid) // 2]:.1f} ms). The "
                f"cache stays at {size(w['full_context_bytes'])}."]
    row = w.get("engine_row")
    out = [f"**The window:** {w['n_positions']:,} positions; a whole context's cache would be "
           f"{size(w['full_context_bytes'])} (bytes a token × {w['n_positions']:,})."]
    if row:
        out.append(f"The engine's buffer for this conversation ({row['capacity']} positions, allocated at once): "
                   f"{size(row['bytes'])}.")
    return out


# ---------------------------------------------------------------------------------------------
# Batching


def live_figure(data: dict) -> go.Figure:
    """Each row of the engine's batch now: its prompt's positions and the tokens it has written, against those it
    asked for."""
    rows = data["rows"]
    fig = go.Figure()
    names = [f"row {i + 1}" for i in range(len(rows))]
    fig.add_trace(go.Bar(y=names, x=[min(r["position"], r["prompt"]) for r in rows], orientation="h",
                         name="prompt positions read", marker_color=CACHE,
                         hovertemplate="%{y}: %{x} prompt positions<extra></extra>"))
    fig.add_trace(go.Bar(y=names, x=[r["made"] for r in rows], orientation="h", name="tokens written",
                         marker_color=TURN, hovertemplate="%{y}: %{x} tokens written<extra></extra>"))
    fig.add_trace(go.Bar(y=names, x=[r["new"] - r["made"] for r in rows], orientation="h", name="still to write",
                         marker=dict(color="white", line=dict(color="#999999", width=1)),
                         hovertemplate="%{y}: %{x} still to write<extra></extra>"))
    if not data["serving"]:
        title = "No generation has been served by this process yet"
    elif rows:
        title = (f"{plural(len(rows), 'row')} in the batch now; {data['steps']} steps in {data['window_s']:g} s"
                 + (f", {data['step_ms']:.0f} ms each" if data["step_ms"] else ""))
    else:
        title = "The engine is idle: no row in its batch now"
    fig.update_layout(**layout(title=_title(title), barmode="stack", height=max(220, 60 + 22 * len(rows)),
                               xaxis=dict(title="positions"), yaxis=dict(autorange="reversed"),
                               legend=dict(orientation="h", y=-0.3)))
    return distinguish(fig)


def live_markdown(data: dict) -> str:
    """The live view's text alternative: the engine's rows, rates and totals."""
    if not data["serving"]:
        return ("**No engine in this process yet:** the engine that serves SmolLM2 is made by the first generation "
                "that asks for it (the Generation tab with SmolLM2, or the experiment below).")
    lines = [f"Measured at {data['measured_at']} over {data['window_s']:g} s: **{plural(len(data['rows']), 'row')}** "
             f"in the batch (at most {data['max_rows']}), {data['waiting']} waiting; {plural(data['steps'], 'step')}"
             + (f" of {data['step_ms']:.1f} ms on average" if data["step_ms"] else "")
             + f", **{data['tokens_per_s']:g} tokens a second**. Weights: {data['weights']}.", ""]
    if data["rows"]:
        lines += ["| row | prompt tokens | position | written | asked |", "|---|---|---|---|---|"]
        lines += [f"| {i + 1} | {r['prompt']} | {r['position']} | {r['made']} | {r['new']} |"
                  for i, r in enumerate(data["rows"])]
    t = data["totals"]
    lines += ["", f"Since it started: {t['steps']:,} steps, {t['tokens']:,} tokens written, {t['prefilled']:,} prompt "
              f"positions read, {t['prefix_hits']:,} prompt chunks found in its prefix cache, {t['busy_seconds']:g} s "
              "busy."]
    return "\n".join(lines)


def batch_figure(data: dict) -> go.Figure:
    """Left: the decode steps' times against the rows they carried (every step, their median per batch size, and
    the fit a + b B); right: tokens a second against the batch size (the decode steps', the whole run's, and what
    the fit predicts)."""
    runs, fit = data["runs"], data["roofline"]["fit"]
    fig = make_subplots(rows=1, cols=2, subplot_titles=["A decode step (ms)", "Tokens a second"],
                        horizontal_spacing=0.12)
    points = [p for r in runs for p in r["points"]]
    fig.add_trace(go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="markers", name="each step",
                             marker=dict(color="#bbbbbb", size=6), hovertemplate="%{x} rows: %{y:.1f} ms"
                                                                                  "<extra></extra>"), row=1, col=1)
    timed = [r for r in runs if r["decode_ms"] is not None]
    fig.add_trace(go.Scatter(x=[r["batch"] for r in timed], y=[r["decode_ms"] for r in timed], mode="lines+markers",
                             name="median step", line=dict(color=CACHE),
                             hovertemplate="batch %{x}: %{y:.1f} ms<extra></extra>"), row=1, col=1)
    sizes = [r["batch"] for r in runs]
    if fit:
        fig.add_trace(go.Scatter(x=sizes, y=[fit["a_ms"] + fit["b_ms"] * b for b in sizes], mode="lines",
                                 name="fit: a + b × rows", line=dict(color=ACCENT, dash="dash"),
                                 hovertemplate="%{x} rows: %{y:.1f} ms<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=[r["batch"] for r in timed], y=[r["decode_tokens_per_s"] for r in timed],
                             mode="lines+markers", name="decode steps", line=dict(color=CACHE), showlegend=False,
                             hovertemplate="batch %{x}: %{y:.0f} tokens/s<extra></extra>"), row=1, col=2)
    fig.add_trace(go.Scatter(x=sizes, y=[r["tokens_per_s"] for r in runs], mode="lines+markers",
                             name="the whole run (prompts and sampling too)", line=dict(color=TURN),
                             hovertemplate="batch %{x}: %{y:.0f} tokens/s<extra></extra>"), row=1, col=2)
    if fit:
        fig.add_trace(go.Scatter(x=sizes, y=[fit["predicted_tokens_per_s"].get(str(b)) for b in sizes], mode="lines",
                                 name="fit: B / (a + b B)", line=dict(color=ACCENT, dash="dash"), showlegend=False,
                                 hovertemplate="%{x} rows: %{y:.0f} tokens/s<extra></extra>"), row=1, col=2)
    axis = dict(type="log", dtick=0.30102999566, title="rows in the batch")   # ticks at 1, 2, 4, ... (log10 2)
    turn = f": the turn at about {fit['turn']:g} rows" if fit and fit["turn"] else ""
    fig.update_layout(**layout(title=_title(f"SmolLM2, the same prompt at batch 1 to {sizes[-1]}{turn}"),
                               height=380, legend=dict(orientation="h", y=-0.3)))
    fig.update_xaxes(**axis)
    fig.update_yaxes(rangemode="tozero")
    return distinguish(fig)


def _cell(x, fmt: str = "{:.1f}") -> str:
    return "—" if x is None else fmt.format(x)


def batching_markdown(data: dict) -> str:
    """The experiment's text alternative: the table per batch size, the roofline read from it, the invariance."""
    if data.get("waiting"):
        return "*Another student's experiment holds this server's experiment engine: yours starts when it ends.*"
    r, fit = data["roofline"], data["roofline"]["fit"]
    sizes = data.get("sizes") or [run["batch"] for run in data["runs"]]
    done = len(data["runs"])
    status = [f"*Measuring batch {sizes[done]} ({done + 1} of {len(sizes)})…*", ""] if done < len(sizes) else []
    lines = status + ["| rows | a step (ms) | tokens/s, steps | tokens/s, run | row 0 |", "|---|---|---|---|---|"]
    for run in data["runs"]:
        same = "identical bits" if run["row0"]["same_bits"] and run["row0"]["same_tokens"] else \
            f"differs (Δp {run['row0']['max_prob_diff']:.2g})"
        lines.append(f"| {run['batch']} | {_cell(run['decode_ms'])} | {_cell(run['decode_tokens_per_s'], '{:.0f}')} "
                     f"| {run['tokens_per_s']:.0f} | {same} |")
    lines += ["", "*A step*: the median of the steps in which every row decoded (none reading its prompt); "
              "*tokens/s, steps*: rows ÷ that step; *tokens/s, run*: every token ÷ the whole run's time (reading the "
              "prompts and sampling too). Steps per run: " + ", ".join(
                  f"{run['steps']} ({run['prefill_steps']} reading prompts)" for run in data["runs"]) + "."]
    w = r["weights"]
    lines += ["", f"**What a step reads and computes**, from the served model's parameters: {w['matrices']} "
              f"matrices, {w['params'] / 1e6:.1f} M weights in {size(w['bytes'])}, {data['weights']}, read once a "
              f"step whatever the batch; each row computes {r['flops_per_token'] / 1e6:.0f} MFLOPs "
              f"(2 × weights, plus attention over {r['positions']:g} keys) and reads its own keys and values "
              f"({size(r['kv_bytes_per_token'])} a position). FLOPs per byte read: "
              + ", ".join(f"{s['intensity']:g} at {s['rows']}" for s in r["steps"]) + "."]
    if fit and fit["turn"]:
        lines += ["", f"**The fit** t = a + b × rows: a = {fit['a_ms']:.1f} ms a step whatever the batch (the "
                  f"weights read at {_cell(fit['weight_read_gb_s'], '{:g}')} GB/s, and the step's fixed costs), "
                  f"b = {fit['b_ms']:.2f} ms more for each row ({_cell(fit['row_gflop_s'], '{:g}')} GFLOP/s). "
                  f"Below about **{fit['turn']:g} rows** a step is mostly reading (memory-bound: another row is "
                  f"nearly free); above, mostly arithmetic (compute-bound): tokens a second level off towards "
                  f"1 / b = {fit['ceiling_tokens_per_s']:g}."]
    elif fit:
        lines += ["", f"**The fit** t = a + b × rows: a = {fit['a_ms']:.1f} ms, b = {fit['b_ms']:.2f} ms: the step "
                  "time did not grow with the batch here (every row was nearly free: still memory-bound), so no turn "
                  "within these sizes. Try up to batch 32."]
    verdict = "the same bits at every batch size" if data["invariant"] else "**not** the same at every size"
    lines += ["", f"**Batch invariance:** row 0 (seed {data['seed']}) wrote “{quoted(data['row0_text'])}” alone; in "
              f"every batch its distributions and tokens were {verdict}.", "",
              f"Measured at {data['measured_at']} on {data['cpus']} CPUs, load average "
              f"{', '.join(map(str, data['load_average'] or []))}; {data['others_served']} rows of the class were "
              "being served meanwhile."]
    return "\n".join(lines)
