"""The Attention tab's head finder and induction view (issue #34): thin handlers over analysis/head_finder.py and
analysis/induction.py, the figures of figures/heads.py, laid out by attention_tab.build as two more sub-tabs.

Head finder: every head of a model ranked by one statistic, over the shipped corpus statistics or the text above;
a ranked head opens in the head view (the layer and head controls are set, the head view's sub-tab selected).
Induction: a seeded random sequence repeated twice through our GPT or SmolLM2, each token's loss and every head's
induction and previous-token score.
Knock out: the head (or, with an aggregate chosen, the layer's whole attention) the head view shows, knocked out on
the sentence above, through the Causal lab's `ablate` (the same analysis and figures, next to the view it changes).
"""

from __future__ import annotations

import re

import gradio as gr

from playground.analysis import attention as att
from playground.analysis import head_finder as hf
from playground.analysis import heads, models
from playground.analysis import induction as ind
from playground.figures import heads as fh
from playground.ui import causal_tab
from playground.ui.common import (LATEX, Shared, as_int, json_file, mark_when_changed, refuse_missing_smollm2,
                                  text_input, warn)

HEAD_VIEW_TAB = "head-view"                                 # the id of the head view's sub-tab (attention_tab)
CAUSAL = models.ids("gpt", "llama")                    # the models induction runs on: our GPT, SmolLM2
DEFAULT_CAUSAL = CAUSAL[0] if CAUSAL else ""
SEED_MAX = 2**31 - 1


def _attention_model(key, listed: list[str]) -> att.AttentionModel:
    refuse_missing_smollm2(key)
    if models.resolve(key) not in listed:
        shown = repr(key[:40]) if isinstance(key, str) else f"a {type(key).__name__}"
        raise gr.Error(f"Unknown model {shown} for this view; choose from {', '.join(listed)}.")
    return att.load(key)


def _choice(value, allowed, what: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        shown = repr(value[:30]) if isinstance(value, str) else f"a {type(value).__name__}"
        raise gr.Error(f"{what} should be one of {', '.join(allowed)}, not {shown}.")
    return value


def head_finder(text, model_key="minilm", source="corpus", stat="previous", order="largest"):
    """Every head of the model ranked by one statistic over the corpus sample or the text: the figure, its table,
    the ranked heads to open, the JSON."""
    notices: list[str] = []
    m = _attention_model(model_key, models.ids("bert", "gpt", "llama"))
    source = _choice(source, hf.SOURCES, "Source")
    stat = _choice(stat, list(heads.STATS), "Statistic")
    order = _choice(order, hf.ORDERS, "Order")
    if source == "text":
        text = text_input(text, notices)
        if not text.strip():
            raise gr.Error("Type a sentence above to rank the heads on it, or rank them over the corpus.")
    try:
        data = hf.find(m, source, stat, order, text if source == "text" else "", notices)
    except (hf.HeadStatsError, att.AttentionError) as err:
        raise gr.Error(str(err)) from None
    warn(notices)
    top = [(f"{i + 1}. layer {r['layer']}, head {r['head']} ({stat} {r[stat]:.3f})", f"{r['layer']}:{r['head']}")
           for i, r in enumerate(data["ranking"][:hf.TOP])]
    return (fh.finder_figure(data, hf.TOP), fh.finder_md(data, hf.TOP, heads.STATS),
            gr.update(choices=top, value=top[0][1]), json_file(data, "head_finder"), data)


def fitting_stat(model_key):
    """The statistic the finder ranks by when the model changes: the one that fits its family (hf.first_stat)."""
    key = models.resolve(model_key)
    return hf.first_stat(models.family(key)) if key else gr.skip()


def open_head(choice, model_key):
    """The chosen head in the head view: its model's layer and head set, the head view's sub-tab selected."""
    try:
        layer, head = (int(x) for x in str(choice).split(":"))
    except ValueError:
        raise gr.Error("Rank the heads first, then choose one to open.") from None
    s = models.shape(model_key if models.resolve(model_key) else models.MINILM)
    if not (0 <= layer < s.layers and 0 <= head < s.heads):
        raise gr.Error(f"Layer {layer}, head {head} is not a head of {model_key}.")
    return gr.update(value=layer), gr.update(value=str(head)), gr.update(selected=HEAD_VIEW_TAB)


def induction(model_key=DEFAULT_CAUSAL, n_tokens=ind.DEFAULT_N, seed=ind.DEFAULT_SEED, knock_out=0):
    """A random sequence of n tokens repeated twice: each token's loss, every head's induction and previous-token
    score, each figure with its text alternative, the JSON. With `knock_out` k > 0, the same sequence again without
    the k strongest induction heads, and without k other heads (the sanity check)."""
    notices: list[str] = []
    if models.resolve(model_key) in models.ids("bert"):
        raise gr.Error("Induction needs a causal language model (our GPT or SmolLM2): it measures the loss on the "
                       "repeated copy, which a BERT encoder does not predict.")
    m = _attention_model(model_key, CAUSAL)
    n = as_int(n_tokens, "Tokens per copy", ind.N_MIN, ind.limit(m.tokenizer, m.family, m.max_tokens), notices)
    seed = as_int(seed, "Seed", 0, SEED_MAX, notices)
    s = models.shape(m.key)
    k = as_int(knock_out, "Heads knocked out", 0, min(ind.ABLATE_MAX, s.layers * s.heads // 2), notices)
    data = ind.view(m, n, seed, ablate=k)
    warn(notices)
    text = fh.induction_md(data)
    return fh.copy_loss_figure(data), fh.scores_figure(data), text, json_file(data, "induction"), data


# MiniLM, the tab's default, is a sentence encoder without an LM head: its heads are knocked out in MiniLM + LoRA's
# masked LM, the same encoder with rank-8 adapters merged into its weights and an MLM head (nets/minilm_mlm.py)
WITH_LM_HEAD = {models.MINILM: "minilm-mlm"}


def _knockable(key: str | None) -> str:
    """The model whose prediction the knockout changes for the tab's model `key`: the model itself, or MiniLM's
    masked LM; a message naming the tab's own models when there is none."""
    if key in causal_tab.ALL:
        return key
    if WITH_LM_HEAD.get(key) in causal_tab.ALL:
        return WITH_LM_HEAD[key]
    listed = [name for name in models.ids("bert", "gpt", "llama") if name in causal_tab.ALL]
    raise gr.Error(f"{att.label(key) if key else 'This model'} has no prediction to change (a sentence encoder "
                   f"without an LM head): choose {' or '.join(att.label(name) for name in listed) or 'another model'}"
                   " above to knock out one of its heads.")


def knock_out(text, model_key, layer=0, head="mean", how="zero"):
    """The head view's head (a number) or, for an aggregate ("mean", "max"), the layer's attention, knocked out on
    the sentence: the prediction before and after, as the Causal lab's `ablate` computes it. A masked LM predicts at
    a [MASK]: when the sentence has none, its last word is masked, with a notice. MiniLM's head is knocked out in its
    masked LM (WITH_LM_HEAD), said above the text."""
    shown = models.resolve(model_key)
    key = _knockable(shown)
    text = str(text or "")
    if key in causal_tab.MASKED and "[mask]" not in text.lower():
        words = list(re.finditer(r"\w+", text))
        if not words:
            raise gr.Error("Type a sentence first: the knockout changes the prediction at one of its words.")
        last = words[-1]
        text = text[:last.start()] + "[MASK]" + text[last.end():]
        gr.Info(f"No [MASK] in the sentence: its last word, {last.group()!r}, is masked and predicted.")
    one = str(head).isdigit()
    figure, markdown, data = causal_tab.ablate(key, text, "head" if one else "attn", layer, int(head) if one else 0,
                                               how, "", True)
    if key != shown:
        what = f"head {data['head']} of layer {data['layer']}" if one else f"layer {data['layer']}'s attention"
        markdown = (f"*{att.label(shown).split(' (')[0]} has no LM head: its {what} is knocked out in "
                    f"{models.get(key).label}, the same "
                    "encoder with small LoRA adapters merged into its weights and an MLM head, whose attention is "
                    f"close to the view's, not the same.*\n\n{markdown}")
    return figure, markdown, data


FINDER_MD = r"""**Find a head by what it does.** Each head is described by six numbers, averaged over the queries
(from the second token on): the **entropy** of its attention (low: it looks at one token), the **mean distance** it
looks over, its weight on the **previous** token, on the **first** token (where idle heads park their weight: an
attention sink, or BERT's `[CLS]`), on earlier **duplicates** of the query's token, and on the token *after* an
earlier duplicate (**induction**: "A B … A → B"). Over the **corpus**, the numbers come shipped with the app,
measured by `python -m playground.tools.head_stats` on windows of the corpus sample (its protocol is in the JSON);
over **your text**, they are computed now. One sentence is a small sample: compare it with the corpus."""

INDUCTION_MD = r"""**Induction heads** (Olsson et al. 2022). A sequence of random tokens cannot be predicted: the loss
on it sits near (or above) $\ln V$. Repeat it, and a model with induction heads predicts each token of the second copy
from the first: it finds the earlier occurrence of the current token and copies what followed it. Such a head
attends from each token of the second copy to the token after its earlier occurrence (its **induction score** is
that weight, averaged); it needs a **previous-token head** in an earlier layer, which writes each token's predecessor
into it. Same model, seed and length: the same sequence and the same numbers."""


KNOCK_OUT_MD = """Change the model and see what follows. **Knock out** the head chosen above (or, with *mean* or
*max* chosen, the layer's whole attention) on the sentence above, and compare the next-token prediction (GPT,
SmolLM2; a masked LM's at its [MASK]; MiniLM, an encoder without an LM head, through its masked-LM version) before
and after, with the loss at every position. The sanity check beside it
is the same knockout on the model with its weights re-initialised: a trained model's effect should dwarf it. The
Causal lab does the same for any text and ranks every head."""


def build_knock_out(shared: Shared, model: gr.Dropdown, layer: gr.Slider, head: gr.Dropdown) -> None:
    """An accordion in the head view: the chosen head knocked out on the sentence, computed when asked (a button)."""
    with gr.Accordion("Knock this head out: what changes?", open=False):
        gr.Markdown(KNOCK_OUT_MD)
        with gr.Row():
            how = gr.Radio(list(causal_tab.iv.HOWS), value="zero", label="By (mean and resample read the sentence)")
            go = gr.Button("Knock it out", variant="primary", scale=0)
        with gr.Row():
            with gr.Column(scale=3):
                plot = gr.Plot(label="Before and after", elem_id="attn-knockout")
            with gr.Column(scale=2):
                text = gr.Markdown(elem_id="attn-knockout-text", elem_classes=["figure-text"])
        with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
            data = gr.JSON(label="ablate")
    asked = [shared.text, model, layer, head, how]
    go.click(knock_out, inputs=asked, outputs=[plot, text, data], api_visibility="private", show_progress="minimal")
    mark_when_changed(plot, "attn-knockout", asked, "the sentence, the model, the layer, the head or the ablation",
                      "Knock it out")


def build(shared: Shared, model: gr.Dropdown, layer: gr.Slider, head: gr.Dropdown, views: gr.Tabs):
    """The two sub-tabs, inside the tab's `views`: the head finder on the tab's `model`, whose button sets the head
    view's `layer` and `head` and selects its sub-tab, and the induction view. Returns the button's event, which
    attention_tab follows by redrawing the head view."""
    ranked, go = _build_finder(shared, model)
    _build_induction()
    return go.click(open_head, inputs=[ranked, model], outputs=[layer, head, views], api_visibility="private",
                    queue=False)


def _build_finder(shared: Shared, model: gr.Dropdown) -> tuple[gr.Dropdown, gr.Button]:
    """The head finder's sub-tab: the ranked head to open and the button that opens it."""
    with gr.Tab("Head finder", id="head-finder") as tab:
        gr.Markdown(FINDER_MD, latex_delimiters=LATEX)
        with gr.Row():
            source = gr.Radio([("the corpus sample", "corpus"), ("the text above", "text")], value="corpus",
                              label="Statistics over")
            stat = gr.Dropdown([(d, k) for k, d in heads.STATS.items()], label="Rank by",
                               value=hf.first_stat(models.family(model.value)))
            order = gr.Radio([("largest first", "largest"), ("smallest first", "smallest")], value="largest",
                             label="Order")
        plot = gr.Plot(label="Every head by the chosen statistic", elem_id="attn-finder")
        table = gr.Markdown(elem_id="attn-finder-table")
        with gr.Row():
            chosen = gr.Dropdown([], label="A ranked head", scale=3, allow_custom_value=True)
            go = gr.Button("Open in the head view", scale=1, variant="primary")
        with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
            file = gr.DownloadButton("Download JSON", size="sm")
            data = gr.JSON(label="head_finder")
    model.change(fitting_stat, model, stat, api_visibility="private", queue=False)   # ranked by what fits it
    gr.on([tab.select, shared.changed("text"), model.change, source.change, stat.change, order.change], head_finder,
          inputs=[shared.text, model, source, stat, order], outputs=[plot, table, chosen, file, data],
          api_name="head_finder", trigger_mode="always_last", show_progress="minimal")
    return chosen, go


def _build_induction() -> None:
    """The induction view's sub-tab, with its own model (a causal LM), length and seed."""
    with gr.Tab("Induction heads", id="induction") as tab:
        gr.Markdown(INDUCTION_MD, latex_delimiters=LATEX)
        with gr.Row():
            model = gr.Dropdown([(att.label(k), k) for k in CAUSAL], value=DEFAULT_CAUSAL, label="Causal model",
                                allow_custom_value=True, scale=3)
            n = gr.Slider(ind.N_MIN, ind.N_MAX, value=ind.DEFAULT_N, step=1, label="Random tokens per copy", scale=2)
            seed = gr.Number(ind.DEFAULT_SEED, precision=0, label="Seed", minimum=0, scale=1)
            knock_out = gr.Slider(0, ind.ABLATE_MAX, value=0, step=1, scale=2,
                                  label="Knock out the top induction heads (and as many others, to compare)")
        with gr.Row():
            with gr.Column():
                loss_plot = gr.Plot(label="Loss on the first and the second copy", elem_id="attn-induction-loss")
            with gr.Column():
                scatter = gr.Plot(label="Induction against previous-token score", elem_id="attn-induction-heads")
        summary = gr.Markdown(elem_id="attn-induction-summary")
        with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
            file = gr.DownloadButton("Download JSON", size="sm")
            data = gr.JSON(label="induction")
    gr.on([tab.select, model.change, n.release, seed.submit, knock_out.release], induction,
          inputs=[model, n, seed, knock_out],
          outputs=[loss_plot, scatter, summary, file, data], api_name="induction", trigger_mode="always_last",
          show_progress="minimal")
