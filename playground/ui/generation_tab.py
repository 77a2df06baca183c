"""The Generation tab: a prompt continued by a causal language model, one token at a time, with the
distribution behind every choice; two models side by side on one prompt; the GPT's causal attention."""

from __future__ import annotations

import math
import time

import gradio as gr
import orjson

from playground.figures import generation as fgen
from playground.analysis import focus, generation, models
from playground.ui import causal_tab, generation_reasoning, smollm2_card
from playground.ui.common import (FIGURE, FOLLOW, Shared, as_int, as_number, json_file, mark_when_changed,
                                  model_ids, refuse_missing_smollm2, text_input, things_to_try, warn)

LM_KINDS = ("gpt", "lstm", "gru", "rnn", "ngram")   # every causal LM kind with `step`; the GPT first
MAX_NEW_TOKENS = 1_000                     # longer requests are clamped, with a notice
MAX_SEED = 2**31 - 1
MAX_BEAM = 16
MAX_BEAM_TOKENS = 200                    # beam length: width sequences per step (and, past a GPT's context,
                                         # each beam's whole window again at every step)
STRATEGIES = ["greedy", "temperature", "top-k", "top-p", "beam"]
STREAM_EVERY = 0.1                         # seconds between screen updates while streaming

# Every shipped causal LM and SmolLM2-135M-Instruct when its package is installed (the registry, analysis/models.py:
# each loaded on first use; SmolLM2 in about 6 s and 0.5 GB, so the app's start does not wait for it)
SMOLLM2 = models.SMOLLM2
LISTED = models.ids(*LM_KINDS, "llama")
DEFAULT_MODEL = "gpt-shakespeare" if "gpt-shakespeare" in LISTED else next(iter(LISTED), None)
ALIASED = {"allow_custom_value": True}  # a model dropdown also takes an alias (`gpt`, `smollm2`): _model checks it
DEFAULT_PROMPT = "ROMEO:\nBut soft, what light"
TRY = [("a speaker", ["JULIET:\n"]), ("Hamlet", ["To be, or not to be"]),
       ("modern English", ["The computer crashed and my phone"]), ("digits it never saw", ["In the year 1600,"])]


def _label(name: str) -> str:
    if name == SMOLLM2:
        weights = "bf16 weights from the Hub" if models.smollm2_source() == "hub" else "4-bit weights"
        return f"SmolLM2-135M-Instruct (Llama family, {weights}, loads on first use)"
    c = models.get(name)
    loss = c.card.get("held_out", {}).get("loss", "?")  # the whole held-out split's (checkpoints.CARD)
    if c.kind == "ngram":
        return (f"{name} ({c.config.n}-gram, {c.config.smoothing}, {c.card.get('n_params', 0):,} counts, "
                f"held-out loss {loss})")
    return f"{name} ({c.kind}, {c.card.get('n_params', 0) / 1e6:.2f}M parameters, held-out loss {loss})"


# ---------------------------------------------------------------------------------------------
# Coercing the UI's values into a decoding rule; every bad value becomes a rule or a message


def _model(name) -> models.Model:
    """A causal LM of the registry by its id or alias (SmolLM2 loaded on its first use)."""
    refuse_missing_smollm2(name)
    key = models.resolve(name)
    if key is None or models.family(key) not in (*LM_KINDS, "llama"):
        raise gr.Error(f"Unknown model {str(name)[:40]!r}; choose from {', '.join(LISTED)}.")
    try:
        return models.get(key)
    except models.Missing as err:  # the Hub's download failed: the reason, never a traceback
        raise gr.Error(str(err)) from None


def decoding_rule(strategy, temperature, top_k, top_p, vocab_size: int, notices: list[str]) -> dict:
    """The sampling arguments of a strategy. Documented rules: temperature 0 means greedy; top-k
    larger than the vocabulary keeps every token; top-p at or below 0 keeps only the most probable
    token, above 1 keeps every token."""
    if strategy not in STRATEGIES:
        raise gr.Error(f"Unknown strategy {str(strategy)[:30]!r}; choose from {', '.join(STRATEGIES)}.")
    if strategy in ("greedy", "beam"):
        return {"temperature": 0.0, "top_k": 0, "top_p": 1.0}
    t = as_number(temperature, "Temperature")
    if t < 0:
        notices.append(f"Temperature {t} is below 0; using 0 (greedy).")
        t = 0.0
    elif t > 5:
        notices.append(f"Temperature {t} is above 5; using 5.")
        t = 5.0
    if t == 0:
        notices.append("Temperature 0 means greedy decoding: the most probable token every time.")
    rule = {"temperature": t, "top_k": 0, "top_p": 1.0}
    if strategy == "top-k":
        k = as_int(top_k, "Top-k", 1, 10**9, notices)
        if k > vocab_size:
            notices.append(f"Top-k {k} is larger than the vocabulary ({vocab_size} tokens): every token is kept.")
            k = vocab_size
        rule["top_k"] = k
    elif strategy == "top-p":
        p = as_number(top_p, "Top-p")
        if p <= 0:
            notices.append(f"Top-p {p} keeps no probability mass; keeping only the most probable token.")
            p = 1e-9
        elif p > 1:
            notices.append(f"Top-p {p} is above 1; using 1 (every token).")
            p = 1.0
        rule["top_p"] = p
    return rule


def encode_prompt(ckpt, prompt, notices: list[str]) -> tuple[str, list[int]]:
    """The prompt's text as the model reads it and its ids (analysis.generation.encode_prompt), a non-text prompt
    refused."""
    text_input(prompt, [])  # a string or None, else a gr.Error
    return generation.encode_prompt(ckpt, prompt, notices)


# ---------------------------------------------------------------------------------------------
# Handlers


def shown_inputs(prompt, strategy, max_new_tokens, temperature, top_k, top_p, seed, beam_width=None, chat=None,
                 **models) -> dict:
    """What a view was computed from, by the names of figures.generation.STALE_JS and as the page sent them: the
    page dims the view when one of these changes. Only the inputs the strategy reads (greedy reads no temperature)."""
    sampled = strategy in ("temperature", "top-k", "top-p")
    shown = {"prompt": prompt, **models, "max_new_tokens": max_new_tokens, "strategy": strategy, "chat": chat,
             "temperature": temperature if sampled else None, "seed": seed if sampled else None,
             "top_k": top_k if strategy == "top-k" else None, "top_p": top_p if strategy == "top-p" else None,
             "beam_width": beam_width if strategy == "beam" else None}
    return {k: v for k, v in shown.items() if v is not None}


def _cutoffs(strategy: str) -> tuple[str, ...]:
    return {"top-k": ("top-k",), "top-p": ("top-p",)}.get(strategy, ())


# Under an assistant's reply: a 135M model answers in the tone of a fact it does not know ("The City of Ember by
# Christopher Marlowe, set in medieval London")
CHAT_CAVEAT = ("SmolLM2-135M-Instruct is a very small model: it writes fluent, confident answers and often invents "
               "facts (names, books, dates, places). Check anything it states elsewhere.")


def generate(prompt, model_name, max_new_tokens, strategy, temperature, top_k, top_p, seed, beam_width=4, chat=False):
    """Continue the prompt, streaming the text; every step's distribution is kept for the chart. `chat`: the prompt
    is the user's turn of SmolLM2's chat template, and the answer stops at its end of turn."""
    notices: list[str] = []
    shown_for = shown_inputs(prompt, strategy, max_new_tokens, temperature, top_k, top_p, seed, beam_width, chat,
                             model=model_name)
    if models.resolve(model_name) == SMOLLM2 and not models.loaded(SMOLLM2):
        yield (fgen.generated_html("", [], notices=[models.loading_notice(SMOLLM2)], running=True),
               gr.skip(), [], gr.skip(), gr.skip())
    ckpt = _model(model_name)
    if chat and ckpt.chat is not None:
        prompt = text_input(prompt, notices)
        if not prompt.strip():
            raise gr.Error("Chat: type a question for the assistant.")
    n = as_int(max_new_tokens, "Number of new tokens", 1, MAX_NEW_TOKENS, notices)
    rule = decoding_rule(strategy, temperature, top_k, top_p, ckpt.config.vocab_size, notices)
    seed = as_int(seed, "Seed", 0, MAX_SEED, notices)
    text_input(prompt, [])  # a string or None, else a gr.Error
    try:
        prepared = generation.prepare(ckpt, prompt, bool(chat), notices)
    except generation.GenerationError as err:
        raise gr.Error(str(err)) from None
    warn(notices)
    width = None
    if strategy == "beam":
        width = as_int(beam_width, "Beam width", 1, MAX_BEAM, notices)
        if n > MAX_BEAM_TOKENS:  # beam search costs `width` sequences per step: 1,000 tokens x 16 beams took ~30 s
            notices.append(f"Beam search runs {width} sequences at once; using {MAX_BEAM_TOKENS} new tokens "
                           f"(sampling strategies go up to {MAX_NEW_TOKENS:,}).")
            n = MAX_BEAM_TOKENS
            warn(notices[-1:])
    cutoffs = _cutoffs(strategy)
    caveat = CHAT_CAVEAT if chat and ckpt.chat is not None else ""
    shown = time.perf_counter()
    for steps, data in generation.generate(ckpt, prepared, strategy, rule, seed, n, notices, chat, width):
        last = len(steps) - 1
        if data is not None:
            html = fgen.generated_html(prepared.text, steps, selected=last, notices=notices, running=False,
                                       inputs=shown_for, caveat=caveat)
            chart = fgen.next_token_figure(steps[-1], last, cutoffs) if steps else None
            yield html, chart, kept(steps), json_file(data, "generate"), data
        elif time.perf_counter() - shown > STREAM_EVERY and len(steps) < n:
            # the text (and the steps, kept on the server for a click after Stop); redrawing the chart and the JSON
            # each time slows the browser
            yield (fgen.generated_html(prepared.text, steps, selected=None, notices=notices, running=True,
                                       inputs=shown_for, caveat=caveat), gr.skip(), kept(steps), gr.skip(), gr.skip())
            shown = time.perf_counter()


def waiting(ahead: int, beside: int = 0) -> tuple:
    """What Generation shows before its first step: how many generations are ahead of it (every row of the batch is
    taken) or decoding beside it (SmolLM2's join the class's batch at the next step: playground/serving/engine.py;
    a model no engine serves shares the cores with them); neither: the same generation is being computed for another
    caller, and this one waits for its answer."""
    if ahead:
        notice = (f"Waiting for a place: {ahead} generation{'s' if ahead != 1 else ''} ahead of yours (a class's "
                  "new prompts take turns)…")
    elif not beside:
        notice = "The same generation was asked for a moment ago: it is computed once and shown here when it ends…"
    else:
        notice = (f"Starting beside {beside} other generation{'s' if beside != 1 else ''}: SmolLM2 decodes them all in "
                  "one batch, a step for everyone at once; its first tokens come after its prompt is read…")
    return fgen.generated_html("", [], notices=[notice], running=True), gr.skip(), gr.skip(), gr.skip(), gr.skip()


def kept(steps: list[dict]) -> bytes:
    """The steps as the session keeps them for a click on a token (a gr.State): as JSON, which a session's copy
    copies at once; as 200 steps of dicts, each new page's copy took 13 ms (deep-copying ~4,000 small objects)."""
    return orjson.dumps(steps, option=orjson.OPT_SERIALIZE_NUMPY)


def show_step(steps: bytes, strategy, evt: gr.EventData):
    """A click on a generated token: that step's distribution."""
    index = getattr(evt, "step", None)
    steps = orjson.loads(steps) if steps else []
    if not steps or index is None:
        return gr.skip()
    index = min(max(int(index), 0), len(steps) - 1)
    return fgen.next_token_figure(steps[index], index, _cutoffs(strategy))


def compare(prompt, model_a, model_b, max_new_tokens, strategy, temperature, top_k, top_p, seed):
    """Two models, one prompt, the same decoding rule and seed; the prompt's perplexity under each."""
    notices: list[str] = []
    shown_for = shown_inputs(prompt, strategy, max_new_tokens, temperature, top_k, top_p, seed, model_a=model_a,
                             model_b=model_b)
    n = as_int(max_new_tokens, "Number of new tokens", 1, MAX_NEW_TOKENS, notices)
    seed = as_int(seed, "Seed", 0, MAX_SEED, notices)
    if strategy == "beam":
        notices.append("The comparison samples; beam search is shown in the main view. Using greedy here.")
        strategy = "greedy"
    views, data = [], {"strategy": strategy, "seed": seed, "models": {}}
    for name in (model_a, model_b):
        ckpt = _model(name)
        own: list[str] = []
        rule = decoding_rule(strategy, temperature, top_k, top_p, ckpt.config.vocab_size, own)
        text_input(prompt, [])  # a string or None, else a gr.Error
        text, one = generation.compared(ckpt, prompt, n, rule, seed, own)
        ppl = one["prompt_perplexity"]
        title = f"{name}: prompt perplexity " + (f"{ppl:.2f}" if ppl is not None else "– (needs 2 or more characters)")
        views.append(fgen.generated_html(text, one["steps"], notices=own, title=title, inputs=shown_for,
                                         rerun="Compare"))
        data["models"][name] = one
    warn(notices)
    return views[0], views[1], data


def attention(text, model_name, layer, head):
    """The GPT's causal attention over a text (the prompt and what was generated): one layer and head,
    counted from 0 as in the Attention tab."""
    notices: list[str] = []
    ckpt = _model(model_name)
    if ckpt.kind != "gpt":
        what = "its attention is in the Attention tab" if ckpt.kind == "llama" else "a recurrent model has no attention"
        raise gr.Error(f"{ckpt.name}: {what}. Choose our GPT here.")
    c = ckpt.config
    layer = as_int(layer, "Layer", 0, c.n_layer - 1, notices)
    head = as_int(head, "Head", 0, c.n_head - 1, notices)
    _, ids = encode_prompt(ckpt, text, notices)
    data = generation.causal_attention(ckpt.name, ids, layer, head, notices)
    warn(notices)
    title = f"{ckpt.name}: layer {layer}, head {head} ({len(data['tokens'])} tokens)"
    return fgen.causal_attention_figure(data["tokens"], data["attention"], title), data


def logit_lens(text, model_name):
    """What every layer of a Transformer LM would predict next at each position (our GPT, or SmolLM2)."""
    notices: list[str] = []
    ckpt = _model(model_name)
    if not generation.has_logit_lens(ckpt.model):
        raise gr.Error(f"{ckpt.name} is a recurrent model: it has no stack of residual layers. "
                       "Choose a GPT or SmolLM2.")
    _, ids = encode_prompt(ckpt, text, notices)
    data = generation.logit_lens(ckpt.model, ckpt.tokenizer, ids, notices)
    warn(notices)
    title = f"{ckpt.name}: what each layer would predict next ({len(data['tokens'])} tokens)"
    return fgen.logit_lens_figure(data, title), data


# ---------------------------------------------------------------------------------------------
# Layout and events

LENS_MD = """**Logit lens** (nostalgebraist 2020): apply the model's final normalisation and output layer to the
residual stream after each block, as if the model stopped there. Rows are layers (the embedding at the bottom), columns
the input tokens; each cell is the token that layer would predict next, shaded by its probability. In SmolLM2 the right
answer often appears only in the last few of its 30 blocks; hover a cell for the probability of the final choice."""

INTRO_MD = """A causal language model predicts a distribution over the next token, $p(x_t \\mid x_{<t})$; decoding
turns it into text one token at a time. **Greedy** takes the argmax. **Temperature** $\\tau$ samples from
$\\mathrm{softmax}(z/\\tau)$: below 1 sharper, above 1 flatter, and 0 is greedy. **Top-k** samples among the $k$ most
probable tokens only; **top-p** (nucleus) among the fewest most probable tokens whose probabilities add up to $p$;
both renormalise what they keep. **Beam search** keeps the $b$ most probable partial texts,
$\\log p(y) = \\sum_t \\log p(y_t \\mid y_{<t})$, and returns the best. The GPT keeps every layer's keys and values
(a KV cache), so each new token costs one position, not the whole text again.
Click a generated token to see the distribution it was drawn from. Rules for odd input: characters the model never
saw are left out; an empty prompt starts from a new line; top-k above the vocabulary keeps every token; top-p at or
below 0 keeps the most probable token only, above 1 every token; at most 1,000 new tokens."""

def perplexity_md() -> str:
    """The lectures' argument in numbers: the n-gram of every order against the networks, each on the whole
    held-out split of Tiny Shakespeare with the same protocol (the models' cards)."""
    shipped = {name: models.get(name) for name in LISTED if name != SMOLLM2}
    ngram = next((c for c in shipped.values() if c.kind == "ngram"), None)
    if ngram is None:
        return "No n-gram model is shipped (`python -m playground.train ngram --corpus tinyshakespeare.txt`)."
    window = ngram.card["held_out"]["block_size"]
    rows = [f"| {r['n']}-gram, {r['smoothing']} | counts | {r['n'] - 1} of {window} | {r['loss']:.3f} | "
            f"{r['perplexity']:.2f} |" for r in ngram.card["held_out_table"]]
    rows += [f"| {name} | {c.card.get('n_params', 0) / 1e6:.2f}M parameters | all of "
             f"{c.card['held_out']['block_size']} | "
             f"{c.card['held_out']['loss']:.3f} | {math.exp(c.card['held_out']['loss']):.2f} |"
             for name, c in shipped.items() if c.kind != "ngram" and "loss" in c.card.get("held_out", {})]
    return ("**n-grams against the networks**, each on the whole held-out tenth of Tiny Shakespeare (windows read from "
            "their own start; loss in nats per character, perplexity = e^loss). An n-gram sees n − 1 characters; "
            "Kneser-Ney's back-off to shorter contexts is what makes more context pay; add-k has nothing to back off "
            "to and gains little beyond 4. The networks see everything before a character in its window (the recurrent "
            "models' cards use windows of 64).\n\n| model | size | "
            "characters seen | held-out loss | perplexity |\n|---|---|---|---|---|\n" + "\n".join(rows))


COMPARE_MD = """The same prompt, decoding rule and seed for two models; the **perplexity** of the prompt,
$\\exp\\big(-\\frac{1}{T-1}\\sum_{t=2}^{T} \\log p(x_t \\mid x_{<t})\\big)$, says how surprised each model is by it
(lower is better; 1 would be certainty, the vocabulary size a uniform guess)."""

ATTENTION_MD = """Each row is a token attending to the tokens before it (a GPT cannot look ahead: the upper
triangle is exactly 0). Uses the text of the last generation, or any text typed here."""


def _logit_lens_panel() -> None:
    """The accordion of the logit lens, for the Transformer LMs (our GPT, SmolLM2), and its event."""
    # SmolLM2 (a Llama: it has the lens) is listed without loading it to ask; the shipped models are loaded already
    lens_models = [(_label(n), n) for n in LISTED if n == SMOLLM2 or generation.has_logit_lens(models.get(n).model)]
    with gr.Accordion("Logit lens: what each layer would predict", open=False, visible=bool(lens_models)):
        gr.Markdown(LENS_MD)
        with gr.Row():
            lens_model = gr.Dropdown(lens_models, value=lens_models[0][1] if lens_models else None, label="Model",
                                     **ALIASED,
                                     scale=2)
            lens_run = gr.Button("Show the logit lens", scale=0)
        lens_text = gr.Textbox("The capital of France is Paris, and the capital of Italy is", label="Text", lines=2,
                               max_lines=6)
        lens_plot = gr.Plot(elem_id="gen-lens")
        with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
            lens_json = gr.JSON(label="logit_lens")
    gr.on([lens_run.click, lens_text.submit], logit_lens, inputs=[lens_text, lens_model],
          outputs=[lens_plot, lens_json],
          api_name="logit_lens", trigger_mode="always_last")
    mark_when_changed(lens_plot, "gen-lens", [lens_text, lens_model], "the text or the model", "Show the logit lens")


def _causal_attention_panel(gpts: list[tuple[str, str]]) -> gr.Textbox:
    """The accordion "Causal attention of the generated text" and its event; returns its text box (the generated
    text is put there)."""
    with gr.Accordion("Causal attention of the generated text", open=False, visible=bool(gpts)):  # no GPT: none
        gr.Markdown(ATTENTION_MD)
        with gr.Row():
            att_model = gr.Dropdown(gpts, value=gpts[0][1] if gpts else None, label="GPT", **ALIASED)
            deepest = max((models.shape(n).layers for _, n in gpts), default=2)
            layer = gr.Slider(0, max(1, deepest - 1), value=0, step=1, label="Layer (from 0)")
            widest = max((models.shape(n).heads for _, n in gpts), default=2)
            head = gr.Slider(0, max(1, widest - 1), value=0, step=1, label="Head (from 0)")
            att_run = gr.Button("Show attention", scale=0)
        att_text = gr.Textbox(DEFAULT_PROMPT, label="Text", lines=2, max_lines=6)
        att_plot = gr.Plot(elem_id="gen-att-plot")
        with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
            att_json = gr.JSON(label="generation_attention")
    gr.on([att_run.click, layer.release, head.release], attention, inputs=[att_text, att_model, layer, head],
          outputs=[att_plot, att_json], api_name="generation_attention", trigger_mode="always_last")
    mark_when_changed(att_plot, "gen-att-plot", [att_text, att_model, layer, head], "the text, the model, the layer "
                       "or the head", "Show attention")  # the text is replaced by each new generation
    return att_text


def _smollm2_panels(demo: gr.Blocks) -> None:
    """SmolLM2's card, its chain-of-thought and tool-calling panels (when it is here), and the n-grams' perplexity."""
    smollm2_card.build()
    generation_reasoning.build(demo)
    steering = next((name for name in causal_tab.STEER_PRESETS if "SmolLM2" in name), None)
    if steering:
        gr.Markdown(f"**Steer SmolLM2's generation**: [{steering}]({causal_tab.steer_link(steering)}) opens the Causal "
                    "lab's steering on it and runs it: a direction added to the residual stream, the text with and "
                    "without, the same seed, and a random direction of the same norm beside it.", elem_id="gen-steer")
    with gr.Accordion("n-grams against the networks: perplexity on held-out Shakespeare", open=False):
        gr.Markdown(perplexity_md(), elem_id="gen-perplexity")


def build(demo: gr.Blocks, shared: Shared) -> None:
    """The tab's components and events; the prompt can take `shared.text`, the sentence shared by every tab."""
    sentence = shared.text  # the committed sentence (see Shared)
    choices = [(_label(n), n) for n in LISTED]
    gpts = [(_label(n), n) for n in LISTED if n != SMOLLM2 and models.get(n).kind == "gpt"]
    recurrent = [n for n in LISTED if n != SMOLLM2 and models.get(n).kind != "gpt"]
    gr.Markdown(INTRO_MD, latex_delimiters=[{"left": "$", "right": "$", "display": False}])
    with gr.Row():
        with gr.Column(scale=1):
            prompt = gr.Textbox(DEFAULT_PROMPT, label="Prompt", lines=3, max_lines=10, elem_id="gen-prompt")
            follow = gr.Checkbox(True,
                                 label="Follow the sentence above (up to the word selected there: what comes next?)",
                                 elem_id="gen-follow")
        with gr.Column(scale=1):  # as wide as the prompt: the models' labels are long
            model = gr.Dropdown(choices, value=DEFAULT_MODEL, label="Model", **ALIASED)
            strategy = gr.Radio(STRATEGIES, value="top-k", label="Strategy")
            chat = gr.Checkbox(False, label="Chat: the prompt is the user's turn (SmolLM2's template)",
                               elem_id="gen-chat",
                               visible=SMOLLM2 in LISTED)
    with gr.Row():
        max_new = gr.Number(200, label=f"New tokens (at most {MAX_NEW_TOKENS:,})", precision=0, elem_id="gen-max")
        temperature = gr.Slider(0, 2, value=0.8, step=0.05, label="Temperature (0 = greedy)")
        top_k = gr.Slider(1, 100, value=10, step=1, label="Top-k")
        top_p = gr.Slider(0, 1, value=0.9, step=0.01, label="Top-p")
        beam_width = gr.Slider(1, MAX_BEAM, value=4, step=1, label="Beam width")
        seed = gr.Number(0, label="Seed", precision=0, minimum=0, maximum=MAX_SEED)
    with gr.Row():
        run = gr.Button("Generate", variant="primary", elem_id="gen-run")
        stop = gr.Button("Stop", variant="stop", elem_id="gen-stop", elem_classes=["stop-button"])
    tries = things_to_try(TRY, [prompt])
    text_view = gr.HTML(elem_id="gen-text", elem_classes=FIGURE, js_on_load=fgen.GEN_CLICK_JS)
    step_chart = gr.Plot(label="Next-token distribution at the selected step", elem_id="gen-chart")
    steps_state = gr.State(b"")  # kept(steps)
    with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
        gen_file = gr.DownloadButton("Download JSON", size="sm")
        gen_json = gr.JSON(label="generate")
    with gr.Accordion("Compare two models on this prompt", open=False):
        gr.Markdown(COMPARE_MD, latex_delimiters=[{"left": "$$", "right": "$$", "display": True},
                                                  {"left": "$", "right": "$", "display": False}])
        with gr.Row():
            model_a = gr.Dropdown(choices, value=DEFAULT_MODEL, label="Model A", **ALIASED)
            model_b = gr.Dropdown(choices, value=(recurrent[0] if recurrent else DEFAULT_MODEL), label="Model B",
                                  **ALIASED)
            compare_run = gr.Button("Compare", scale=0)
        with gr.Row():
            view_a = gr.HTML(elem_id="gen-compare-a", elem_classes=FIGURE)
            view_b = gr.HTML(elem_id="gen-compare-b", elem_classes=FIGURE)
        with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
            compare_json = gr.JSON(label="compare_generate")
    att_text = _causal_attention_panel(gpts)

    _logit_lens_panel()
    _smollm2_panels(demo)

    gr.on([shared.changed("focus"), shared.changed("text"), follow.change],
          lambda s, f, on: focus.prefix(s, focus.parse(f, s or "")) if on and s else gr.skip(),
          inputs=[sentence, shared.focus, follow], outputs=prompt, api_visibility="private", queue=False,
          show_progress="hidden", trigger_mode=FOLLOW)
    shared.remember("gen", prompt=prompt, follow=follow, model=model, strategy=strategy, max_new=max_new,
                    temperature=temperature, top_k=top_k, top_p=top_p, beam=beam_width, seed=seed, chat=chat)
    shared.limit("gen.model", model_ids(LISTED))  # a link's `gpt` or `smollm2` too
    generation = dict(inputs=[prompt, model, max_new, strategy, temperature, top_k, top_p, seed, beam_width, chat],
                      outputs=[text_view, step_chart, steps_state, gen_file, gen_json], show_progress="hidden")
    event = gr.on([demo.load, run.click, prompt.submit], generate,  # on load: the tab is never empty
                  api_name="generate", **generation)
    event.then(lambda data: data.get("text", "") if data else gr.skip(), inputs=gen_json, outputs=att_text,
               api_visibility="private")
    examples = [click.then(generate, api_visibility="private", **generation) for click in tries]  # as Generate
    stop.click(None, cancels=[event, *examples], api_visibility="private")
    text_view.click(show_step, inputs=[steps_state, strategy], outputs=step_chart, api_visibility="private",
                    show_progress="hidden")
    compare_run.click(compare, inputs=[prompt, model_a, model_b, max_new, strategy, temperature, top_k, top_p, seed],
                      outputs=[view_a, view_b, compare_json], api_name="compare_generate")
    # A view whose inputs changed (a word selected above rewrites the prompt) is dimmed under a note, in the browser
    stale_inputs = [prompt, model, max_new, strategy, temperature, top_k, top_p, seed, beam_width, chat, model_a,
                    model_b]  # in STALE_JS's order
    gr.on([c.change for c in [*stale_inputs, text_view, step_chart, view_a, view_b]], None, inputs=stale_inputs,
          js=fgen.STALE_JS, queue=False, api_visibility="private", show_progress="hidden")

