"""The figures' text alternatives (assets/describe.js) in a real browser, their numbers checked against the JSON the
same endpoint returns through the API for the page's own inputs: the attention heatmap (each query's most attended
key and its weight), the gradient-flow plot (each cell's first and last gradient norm and its factor per step), the
word space (each word's nearest word on the plot, in 3D, whichever group it is drawn in) and fill-mask's bars (each
candidate and its probability, largest first); then the other bar charts, the figure each endpoint sends given
to the page's describe.js: each bar trace's values, largest first (the quiz's tally, the cockpit's funnel and the
seq2seq step's weights from a room or a session the test drives).
Each figure is the plot's aria-describedby, and "Describe this figure" shows the text."""

from __future__ import annotations

import math
import re

import pytest

from playground.figures.attention import labels
from tests.conftest import Traffic

NUMBER = r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"


def page_inputs(api_name: str) -> list:
    """The inputs a fresh page sends to an event: its components' initial values (the shared sentence's too)."""
    import app

    fn = next(f for f in app.demo.fns.values() if f.api_name == api_name)
    return [block.value for block in fn.inputs]


def close(shown: str, exact: float) -> bool:
    """A number as the text shows it (3 significant digits, or 2 in exponent form) against the exact one."""
    return math.isclose(float(shown), exact, rel_tol=0.06, abs_tol=1e-12)


def description(page, plot: str) -> str:
    """The text alternative of the figure in `plot`, once drawn: the plot names it as its description."""
    page.wait_for_function(f"() => {{ const gd = document.querySelector('{plot} .js-plotly-plot'); const id = gd &&"
                           " gd.getAttribute('aria-describedby'); return id && document.getElementById(id)"
                           ".textContent.length > 20; }", timeout=60_000)
    page.traffic.settle(quiet_ms=400)
    page.wait_for_timeout(500)  # redescribed after its last drawing (300 ms after the page's last change)
    return page.evaluate(f"() => document.getElementById(document.querySelector('{plot} .js-plotly-plot')"
                         ".getAttribute('aria-describedby')).textContent")


@pytest.fixture(scope="module")
def described(browser, app_url):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.traffic = Traffic(page)
        page.goto(app_url)
        page.wait_for_selector("#tabs", timeout=30_000)
        yield page
    finally:
        if browser.is_connected():
            context.close()


@pytest.mark.timeout(300)
def test_attention_heatmap_text_names_each_querys_strongest_key(described, client):
    page = described
    page.get_by_role("tab", name="Attention", exact=True).click()
    text = description(page, "#attn-heatmap")
    data = client.predict(*page_inputs("attention"), api_name="/attention")[-1]
    A, names = data["attention"], labels(data["tokens"])
    rows = [line for line in text.splitlines() if re.match(r"^\d+ ", line)]
    assert len(rows) == min(len(A), 40), f"one line per query row: {text[:300]}"
    for i, line in enumerate(rows):
        key, weight = re.match(rf"^{re.escape(names[i])}: (.+?) ({NUMBER})(?:, then|$)", line).groups()
        best = max(range(len(A[i])), key=lambda j: A[i][j])
        assert close(weight, A[i][best]), f"row {i}: {line} vs {A[i][best]}"
        assert A[i][names.index(key)] == pytest.approx(A[i][best]), f"row {i}: {key} is a strongest key"
    # shown on request, under the figure
    page.locator("#attn-heatmap .fig-describe summary").click()
    assert page.locator("#attn-heatmap .fig-describe p").is_visible()


@pytest.mark.timeout(300)
def test_gradient_flow_text_gives_each_cells_decay_per_step(described, client):
    page = described
    page.get_by_role("tab", name="RNN gradient flow", exact=True).click()
    text = description(page, "#gf-plot")
    data = client.predict(*page_inputs("gradient_flow"), api_name="/gradient_flow")[-1]
    cells, checked = data["cells"], 0
    for cell in cells.values():
        y = cell["grad_norms"]   # the plot's points: t = 1..T, a zero or a missing norm left out
        finite = [t for t, v in enumerate(y) if v is not None and v > 0]
        start, end = finite[0], finite[-1]
        line = next((ln for ln in text.splitlines()
                     if re.search(rf": {NUMBER} at {start + 1} to {NUMBER} at {end + 1}", ln)
                     and close(re.search(rf": ({NUMBER}) at", ln).group(1), y[start])), None)
        assert line, f"a line from {y[start]} at t={start + 1}: {text}"
        last, factor = (float(v) for v in re.search(rf" to ({NUMBER}) at \d+, × ({NUMBER}) per step", line).groups())
        assert close(last, y[end]), line
        assert close(factor, (y[end] / y[start]) ** (1 / (end - start))), line
        checked += 1
    assert checked >= 1


@pytest.mark.timeout(300)
def test_word_space_text_names_each_words_nearest_word_on_the_plot(described, client):
    """The page opens the word space in 2D (one trace per group of words): each line names a word whose distance on
    the plot is the smallest from the first word, among every word shown, not only its own group's."""
    page = described
    page.get_by_role("tab", name="Embeddings", exact=True).click()
    text = description(page, "#emb-word-plot")
    data = client.predict(*page_inputs("embed_words"), api_name="/embed_words")[-1]
    at = {p["word"]: [p["x"], p["y"], p.get("z", 0.0)] for p in data["points"]}
    assert data["dims"] == 2 and len(at) > 2
    lines = [m.groups() for m in re.finditer(r"^(.+?) is nearest to (.+?) on the plot\.$", text, re.M)]
    assert len(lines) == min(len(at), 40), f"one line per word: {text[:400]}"
    for word, nearest in lines:
        far = {other: math.dist(at[word], xyz) for other, xyz in at.items() if other != word}
        assert far[nearest] <= min(far.values()) * (1 + 1e-3) + 1e-4, f"{word}: {nearest} is not the nearest"


@pytest.mark.timeout(300)
def test_fill_mask_bars_text_gives_each_candidate_and_its_probability(described, client):
    """The distribution (bars): the text lists the candidates largest first, each with its probability as the
    endpoint's JSON gives it, for the page's own sentence."""
    page = described
    page.get_by_role("tab", name="Masked-LM fill-in", exact=True).click()
    text = description(page, "#fm-plot")
    predictions = client.predict(*page_inputs("fill_mask"), api_name="/fill_mask")[-1]
    assert predictions and all({"token_str", "score"} <= set(p) for p in predictions)
    line = next((ln for ln in text.splitlines() if "largest first: " in ln), None)
    assert line, f"a line of bars: {text[:300]}"
    shown = re.findall(rf"(?:first: |, )(?:\d+\. )?(.+?) ({NUMBER})(?=,|\.$)", line)   # "1. floor 0.176"
    assert [word for word, _ in shown][:len(predictions)] == [p["token_str"] for p in predictions], line
    for (word, value), p in zip(shown, predictions):
        assert close(value, p["score"]), f"{word}: {value} vs {p['score']}"


@pytest.mark.timeout(300)
def test_a_typed_sentence_is_classified_by_every_method_as_the_endpoint_answers(described, client):
    """Fine-tuning → Classify in the page: a sentence typed and sent with the button is classified by every method,
    and the probabilities figure's text gives each method's most probable classes with the probabilities of the
    endpoint's JSON for that sentence."""
    page = described
    page.get_by_role("tab", name="Fine-tuning", exact=True).click()
    page.get_by_role("tab", name="Classify", exact=True).click()
    sentence = "The ship sailed at dawn."
    page.locator("#classify-text textarea").fill(sentence)
    page.locator("#classify-run").click()
    page.wait_for_function("() => [...document.querySelectorAll('#classify-steps .js-plotly-plot')].some((gd) =>"
                           " (gd.data || []).some((t) => (t.x || []).includes('2: ship')))",
                           timeout=60_000)   # the LSTM's words are the sentence's own: every figure is its
    text = description(page, "#classify-probs")
    inputs = page_inputs("classify")
    data = client.predict(sentence, *inputs[1:], api_name="/classify")[-1]
    assert data["text"] == sentence and len(data["methods"]) >= 5
    lines = [ln for ln in text.splitlines() if ": largest first: " in ln]   # one per bar trace, named by method
    for method in data["methods"]:
        line = next((ln for ln in lines if ln.startswith(method["method"] + " (held-out")), None)
        assert line, f"{method['method']} has a line: {text[:500]}"
        shown = dict((cls, float(v)) for cls, v in re.findall(rf"(?:: |, )(\w+) ({NUMBER})(?=,|\.$)", line))
        best = max(range(len(data["classes"])), key=lambda i: method["probs"][i])
        assert close(str(shown[data["classes"][best]]), method["probs"][best]), (line, method)


def _figure(output) -> dict:
    """A gr.Plot output as the API gives it ({"type": "plotly", "plot": JSON}), as plain lists: numpy arrays come
    encoded ({"dtype", "bdata"}), which the page's plotly decodes before describe.js reads them."""
    import base64
    import json

    import numpy as np

    def plain(value):
        if isinstance(value, dict) and "bdata" in value and "dtype" in value:
            return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).tolist()
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return [plain(v) for v in value] if isinstance(value, list) else value

    figure = json.loads(output["plot"]) if isinstance(output, dict) and "plot" in output else output
    return plain(figure)


def _bar_lines(page, figure: dict) -> dict[str, list[list[float]]]:
    """describe.js's text for `figure`: per bar trace's name, the values it lists (largest first) on each line."""
    text = page.evaluate("(fig) => window.playgroundDescribe.describe({data: fig.data, layout: fig.layout})", figure)
    out: dict[str, list[list[float]]] = {}
    for line in text.splitlines():
        if "largest first: " in line:
            name, listed = line.split("largest first: ", 1)
            values = [float(v) for v in re.findall(rf" ({NUMBER})(?=, |\.$)", listed)]
            out.setdefault(name.removesuffix(": "), []).append(values)
    return out


def _lists(shown: list[float], values: list[float], among: bool = False) -> bool:
    """Whether a line lists these values, largest first (40 at most, as describe.js does); `among`: with others
    between them (an ablation's bars hold the tokens of both predictions, each before and after)."""
    wanted = sorted(values, reverse=True)[:40]
    if not among:
        return len(shown) == len(wanted) and all(close(str(s), v) for s, v in zip(shown, wanted))
    rest = iter(shown)
    return all(any(close(str(s), v) for s in rest) for v in wanted)


def _bars_expected(api: str, data) -> dict[str, list[list[float]]]:
    """Per bar trace's name, the values each of its lines should list: read from the endpoint's own JSON."""
    if api == "tokenize":
        return {"": [[t["n_tokens"] for t in data["tokenizers"].values()]]}
    if api == "embedding_bias":
        return {"cos(w, g)": [[r["projection"] for r in data["projections"]]]}
    if api == "ablate":
        return {"before": [[t["prob"] for t in data["before"]]], "after": [[t["prob"] for t in data["after"]]]}
    if api == "steer":
        shifts = data["shifts"]
        return {"the contrast's direction": [[s["logp_shift"] for s in shifts]],
                "a random direction, same norm (sanity check)": [[s["logp_shift_random"] for s in shifts]]}
    if api == "mlm_cards":
        return {m["name"]: [[m[k] for k in ("top1", "top5", "nsp") if m.get(k) is not None]]
                + ([[m.get("trainable") or m["total"], m["total"]]] if m.get("total") else []) for m in data["models"]}
    if api == "bpe_trace":
        return {"": [[count for _, _, count in data["steps"][-1]["pair_counts"]]]}
    if api == "embedding_bias:words":      # the second figure: each target word's s(w, A, B), X's and Y's traces
        mine = next(r for r in data["weat"]["models"] if "association" in r)
        return {None: [[s for _, s in mine["association"][key]] for key in ("X", "Y")]}
    assert api == "generate", api
    return {"": [[p for _, p in data["steps"][-1]["top"]]]}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("api, plot, answer", [("tokenize", 1, 4), ("embedding_bias", 0, 5), ("ablate", 0, 2),
                                               ("steer", 0, 2), ("mlm_cards", 0, 2), ("generate", 1, 3),
                                               ("bpe_trace", 2, 5), ("embedding_bias:words", 3, 5)])
def test_every_other_bar_chart_text_lists_its_endpoints_numbers(described, client, api, plot, answer):
    """The bar charts not drawn above (the token counts, the gender direction's projections and each word's
    association, an ablation's prediction before and after, steering's logit shifts, the masked-LM cards, the
    next-token distribution, BPE's pair counts at its last merge): the page's own
    describe.js, given the figure the endpoint sends for the page's own inputs, lists the numbers of the endpoint's
    JSON, largest first, on each bar trace's line (a bar ablation that dropped a bar, or a new trace's text, fails)."""
    endpoint = api.split(":")[0]
    outputs = client.predict(*page_inputs(endpoint), api_name=f"/{endpoint}")
    lines = _bar_lines(described, _figure(outputs[plot]))
    data = outputs[answer]
    for name, expected in _bars_expected(api, data).items():
        shown = lines.get(name, []) if name is not None else [line for named in lines.values() for line in named]
        for values in expected:
            assert any(_lists(line, values, among=api == "ablate") for line in shown), (
                f"{api}: {name!r} lists {values}; the text: {lines}")


def _assert_bars(page, figure: dict, expected: dict[str, list[list[float]]], what: str) -> None:
    """describe.js's text for `figure` has a line for each bar trace named in `expected` and none other, and each
    lists its values, largest first."""
    lines = _bar_lines(page, figure)
    assert set(lines) == set(expected), f"{what}: the bar traces described: {lines}"
    for name, wanted in expected.items():
        for values in wanted:
            assert any(_lists(line, values) for line in lines[name]), f"{what}: {name!r} lists {values}: {lines}"


@pytest.mark.timeout(300)
def test_the_quiz_tally_text_lists_the_rooms_counts(described, client, app_url):
    """The class quiz's tally: a room opened by its lecturer (`client`), six students (a Client of their own, a new
    session each) answering, one changing their mind; the figure the lecturer's reveal sends is described with the
    counts of the same call's JSON, the true answer's bar among them."""
    from playground.tools.client import session

    opened = client.predict(api_name="/poll_open")[-1]
    room, key = opened["room"], opened["key"]
    students = session(app_url, timeout=None)
    for guesses in (["es"], ["es"], ["lo"], ["st"], ["es"], ["wi", "lo"]):   # the sixth changes their mind
        students.reset_session()
        for guess in guesses:
            students.predict(room, "bpe-merge", guess, api_name="/poll_answer")
    _, plot, data = client.predict(room, "bpe-merge", key, True, api_name="/poll_tally")
    assert data["revealed"] and data["answer"] in data["counts"] and data["counts"] == {"es": 3, "lo": 2, "st": 1}
    _assert_bars(described, _figure(plot), {"": [list(data["counts"].values())]}, "poll_tally")


@pytest.mark.timeout(300)
def test_the_cockpit_funnel_text_lists_each_steps_counts(described, client):
    """The cockpit's funnel: students walk a workshop in a room (recorded as the workshop panel's handlers record
    them, playground/rooms/progress); /cockpit gives no figure, so the figure is the one the lecturer's page draws
    from that JSON (ui/cockpit.views); its text lists, on the line of each of its three bar traces (reached,
    answered, answered right), the counts of the JSON's steps, largest first."""
    from playground.rooms import progress
    from playground.ui import cockpit

    opened = client.predict(api_name="/poll_open")[-1]
    room, key = opened["room"], opened["key"]
    # (student, the last step reached, {step: right?} for the steps answered): step 1 reached 5, answered 4, right 2
    walks = [("a", 3, {1: True, 2: True}), ("b", 2, {1: True, 2: False}), ("c", 2, {1: False}), ("d", 1, {1: False}),
             ("e", 1, {})]
    for name, last, answers in walks:
        progress.join(room, f"funnel-{name}", name)
        for step in range(1, last + 1):
            progress.reach(room, f"funnel-{name}", "funnel", step)
            if step in answers:
                progress.answered(room, f"funnel-{name}", "funnel", step, "x", answers[step])
    data = client.predict(room, key, api_name="/cockpit")
    steps = data["workshops"][0]["steps"]
    assert data["joined"] == 5 and [(s["reached"], s["answered"], s["correct"]) for s in steps] == [
        (5, 4, 2), (3, 2, 1), (1, 0, 0)]
    expected = {label: [[s[field] for s in steps]] for field, label in (("reached", "reached"),
                                                                         ("answered", "answered"),
                                                                         ("correct", "answered right"))}
    figure = cockpit.views(data)[3]
    _assert_bars(described, _figure({"plot": figure.to_json()}), expected, "cockpit")


@pytest.mark.timeout(300)
def test_the_seq2seq_step_text_lists_its_weights_over_the_source(described, app_url):
    """seq2seq's decoder step: a Client of its own (one session) translates the page's source (/seq2seq), then asks
    for a later step (/seq2seq_step reads that session's translation); the step figure's text lists the weights of
    the same call's JSON, largest first, and they are that step's row of the translation's alignment."""
    from playground.tools.client import session

    student = session(app_url, timeout=None)
    translation = student.predict(*page_inputs("seq2seq"), api_name="/seq2seq")[-1]
    assert translation["alignment"] and len(translation["alignment"]) > 2, translation
    i = len(translation["alignment"]) // 2
    _, plot, data = student.predict(i, api_name="/seq2seq_step")
    assert data["step"] == i and data["weights"] == translation["alignment"][i]
    _assert_bars(described, _figure(plot), {"": [data["weights"]]}, "seq2seq_step")
