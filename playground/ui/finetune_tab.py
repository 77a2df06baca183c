"""The Fine-tuning tab: from a pretrained model to an assistant. LoRA on a text, SFT on instruction-response pairs
and DPO on preference triples, on our GPT or SmolLM2, trained live (on the worker kept for training, so no other
tab waits) or shown at once from the shipped runs in models/ (`python -m playground.train lora|sft|dpo`). The bases
are the registry's (analysis/models.py), the copies every other tab reads, each loaded on first use."""

from __future__ import annotations

import time

import gradio as gr

from playground.analysis import models
from playground.figures import finetune as ff
from playground.training import finetune, finetune_data
from playground.training.finetune import BASES, GPT, SMOLLM2, TARGET_CHOICES, FinetuneConfig, targets_for
from playground.ui import classify_tab
from playground.ui.common import (Shared, as_float, as_int, json_file, refuse_missing_smollm2,
                                  smollm2_said_missing, text_input, warn)

MODEL_LABELS = {GPT: "our GPT (Shakespeare, 1.8M parameters, characters)", SMOLLM2: "SmolLM2-135M-Instruct"}
TARGET_LABELS = [("W_q and W_v (Hu et al.; our GPT: its one W_qkv)", "qv"), ("every attention matrix", "attention"),
                 ("attention and MLP", "all")]
# A live run's size per base, within a minute on two CPU cores. On our GPT it is the shipped LoRA run's recipe (its
# steps, batch, rate and seed: the same run, the same numbers, in about 10 s); on SmolLM2 shorter than the shipped
# SFT and DPO runs (40 steps of 4 and of 2 pairs: 52 s and 123 s of training alone), which their status says.
BATCH = {GPT: finetune.RECIPES["lora"].batch_size, SMOLLM2: 2}
STEPS = {GPT: (finetune.RECIPES["lora"].steps, 200), SMOLLM2: (16, 40)}  # (default, most) per base
RATE = {"lora": finetune.RECIPES["lora"].learning_rate, "sft": 3e-3, "dpo": 1e-3}
SEED = 1337                                                  # the shipped runs' (python -m playground.train's --seed)
SHIPPED = {"lora": "lora-gpt-shakespeare", "sft": "sft-smollm2", "dpo": "dpo-smollm2"}
STREAM_EVERY = 0.5                                           # seconds between redraws of a live run's curve
TEXT_CHARS = 20_000                                          # a LoRA text longer than this is cut, with a notice

INTRO_MD = r"""**From a pretrained model to an assistant.** Pre-training teaches a model text; **supervised
fine-tuning** (SFT) teaches it to answer instructions; **preference optimisation** (DPO, in place of RLHF) teaches it
which of two answers people prefer. Each sub-tab trains **LoRA** adapters (Hu et al. 2021): each chosen matrix W stays
frozen and learns a low-rank update, $h = Wx + \frac{\alpha}{r} BAx$ with $B = 0$ at the start, so training starts at
exactly the pretrained model. Press *Train live* (a minute at most), or read the shipped run shown below."""

LORA_MD = """**LoRA on a text**: the next-token loss on your text, as in pre-training. The default text gives our
Shakespeare GPT two new speakers, a CAPTAIN and a ROBOT: watch them appear in the text after training."""
SFT_MD = """**Supervised fine-tuning**: 32 question-answer pairs written for this project, each answer starting
*Good friend,*. The prompt is given, not learnt: only the response's tokens are in the loss (the mask below).
The texts are for 4 questions the training never saw."""
DPO_MD = r"""**Direct preference optimisation** (Rafailov et al. 2023): 24 prompts, each with a kind *chosen* answer
$y_w$ and a rude *rejected* one $y_l$. The policy π (the model with its adapters) is pushed to prefer $y_w$ more
than the frozen reference π_ref does: $\mathcal{L} = -\log\sigma\big(\beta[(\log\pi(y_w) - \log\pi_{ref}(y_w)) -
(\log\pi(y_l) - \log\pi_{ref}(y_l))]\big)$. β holds π near π_ref: the smaller it is, the further π may drift
(the KL panel)."""


def model_choices() -> list[tuple[str, str]]:
    return [(MODEL_LABELS[b], b) for b in BASES if models.resolve(b) is not None]


def _config(method: str, model, targets, rank, alpha, steps, learning_rate, seed, notices: list[str],
            beta=0.1) -> FinetuneConfig:
    refuse_missing_smollm2(model)
    if model not in BASES:
        raise gr.Error(f"Unknown model {model!r}; choose from {', '.join(BASES)}.")
    if targets not in TARGET_CHOICES:
        raise gr.Error(f"Unknown targets {targets!r}; choose from {', '.join(TARGET_CHOICES)}.")
    rate, b = as_float(learning_rate, "Learning rate", 1e-5, 0.1, notices), as_float(beta, "β", 0.01, 5.0, notices)
    return FinetuneConfig(method=method, base=model, targets=targets_for(model, targets),
                          rank=as_int(rank, "Rank r", 1, 64, notices), alpha=float(as_int(alpha, "α", 1, 128, notices)),
                          steps=as_int(steps, "Steps", 1, STEPS[model][1], notices), batch_size=BATCH[model],
                          learning_rate=rate, beta=b, max_new_tokens=60 if model == GPT else 40,
                          seed=as_int(seed, "Seed", 0, 2**31 - 1, notices))


def _views(result: dict, how: str) -> tuple:
    """Every output of a sub-tab from a run's result (live, or a shipped run's record)."""
    stopped = " Stopped by the user: the adapters as trained so far." if result.get("stopped") else ""
    status = (f"{how} {len(result['steps'])} steps in {result['seconds']:.0f} s on {result['threads']} thread(s)."
              f"{stopped} {ff.held_out_markdown(result)}\n\n{ff.counts_markdown(result)}\n\n"
              f"{ff.exactness_markdown(result)}")
    mask = ff.mask_html(result["mask"]) if "mask" in result else ""
    return status, ff.loss_figure(result), mask, ff.texts_html(result), json_file(result, result["method"]), result


def _progress_views(result: dict, records: list[dict], doing: str = "") -> tuple:
    """A live run under way: its curve so far and what it is doing. The shipped run's texts, mask and data are
    cleared at its start (they are not this run's) and come back with the run's own at its end."""
    partial = {**result, "steps": records}
    status = f"Training: step {records[-1]['step']} of {result['config']['steps']}, loss {records[-1]['loss']:.4f}."
    if doing:
        status += f" Now {doing}…"
    return status, ff.loss_figure(partial), gr.skip(), gr.skip(), gr.skip(), gr.skip()


def _starting_views(cfg: FinetuneConfig, doing: str) -> tuple:
    """Before a live run's first step: nothing of the shipped run stays on screen as if it were this run's."""
    status = f"**Live run** ({cfg.steps} steps of {cfg.batch_size}, seed {cfg.seed}): {doing}…"
    return status, None, "", "", None, None


def _live(cfg: FinetuneConfig, text: str | None, progress):
    """Stream a live run: what it is doing before its first step, the loss curve as it falls, what it does after
    its last (the texts after, the held-out loss, the merge check), then everything. Stop closes the stream: the
    run ends."""
    records: list[dict] = []
    head = {"method": cfg.method, "config": {"steps": cfg.steps}}
    progress(0, desc="starting")
    shown = 0.0
    try:
        for item in finetune.live(cfg, text, lambda: models.get(cfg.base)):
            if "phase" in item:
                doing = finetune.PHASES[item["phase"]]
                if item["phase"] == "loading" and cfg.base == SMOLLM2 and not models.loaded(SMOLLM2):
                    doing = models.loading_notice(SMOLLM2).rstrip("…")
                progress(len(records) / cfg.steps, desc=doing)
                yield _progress_views(head, records, doing) if records else _starting_views(cfg, doing)
            elif "step" in item:
                records.append(item["step"])
                progress(len(records) / cfg.steps, desc=f"step {len(records)}/{cfg.steps}")
                if time.perf_counter() - shown >= STREAM_EVERY:  # the GPT's steps take milliseconds: the page
                    shown = time.perf_counter()                   # redraws the curve at most this often
                    yield _progress_views(head, records)
            else:
                yield _views(item["result"], "Trained live:")
    except models.Missing as err:
        raise gr.Error(str(err)) from None


def lora_finetune(model=GPT, targets="qv", rank=8, alpha=16, steps=STEPS[GPT][0], learning_rate=RATE["lora"], text="",
                  seed=SEED, progress=gr.Progress()):
    """LoRA adapters trained live on a text (the next-token loss). The defaults are the shipped run's."""
    notices: list[str] = []
    cfg = _config("lora", model, targets, rank, alpha, steps, learning_rate, seed, notices)
    text = text_input(text, notices, TEXT_CHARS)
    text = text if text.strip() else finetune_data.default_text()   # as typed: stripping moved the held-out tenth
    if model == GPT:
        vocab = models.tokenizer(GPT).get_vocab()
        unknown = sorted({c for c in text if c not in vocab})
        if unknown:
            notices.append(f"{len(unknown)} character(s) the GPT never saw ({''.join(unknown[:12])}) read as [UNK].")
    if len(text) < 40:
        raise gr.Error("The text is too short to train on: give it at least a line or two (40 characters).")
    warn(notices)
    yield from _live(cfg, text, progress)


def sft(model=SMOLLM2, targets="qv", rank=8, alpha=16, steps=STEPS[SMOLLM2][0], learning_rate=RATE["sft"], seed=SEED,
        progress=gr.Progress()):
    """Supervised fine-tuning live on the instruction-response pairs, the loss on the responses only."""
    notices: list[str] = []
    cfg = _config("sft", model, targets, rank, alpha, steps, learning_rate, seed, notices)
    warn(notices)
    yield from _live(cfg, None, progress)


def dpo(model=SMOLLM2, targets="qv", rank=8, alpha=16, beta=0.1, steps=STEPS[SMOLLM2][0], learning_rate=RATE["dpo"],
        seed=SEED, progress=gr.Progress()):
    """Direct preference optimisation live on the preference triples, against the frozen base."""
    notices: list[str] = []
    cfg = _config("dpo", model, targets, rank, alpha, steps, learning_rate, seed, notices, beta=beta)
    warn(notices)
    yield from _live(cfg, None, progress)


# ---------------------------------------------------------------------------------------------
# Layout and events


def shipped_views(method: str) -> tuple:
    """The shipped run's record (its card), shown before anything is trained; empty views with a note when the
    checkpoint is missing."""
    card = models.card(SHIPPED[method]) if models.resolve(SHIPPED[method]) else {}
    if "result" not in card:
        note = f"No shipped run: `python -m playground.train {method}` makes one in models/{SHIPPED[method]}/."
        return note, None, "", "", None, None
    c = card["result"]["config"]
    how = (f"The shipped run, recorded by `{card['command']}` ({card['date']}; batches of {c['batch_size']}, learning "
           f"rate {c['learning_rate']:g}, seed {c['seed']}; *Train live* runs the settings above):")
    return _views(card["result"], how)


def _controls(method: str, default_model: str):
    with gr.Row():
        model = gr.Dropdown(model_choices(), value=default_model, label="Model", scale=2)
        model.preprocess = smollm2_said_missing(model.preprocess)
        targets = gr.Radio(TARGET_LABELS, value="qv", label="Adapted matrices", scale=2)
    with gr.Row():
        rank = gr.Slider(1, 64, 8, step=1, label="Rank r")
        alpha = gr.Slider(1, 128, 16, step=1, label="α")
        steps = gr.Slider(1, STEPS[default_model][1], STEPS[default_model][0], step=1, label="Steps")
        rate = gr.Number(RATE[method], label="Learning rate", minimum=1e-5, maximum=0.1)
        seed = gr.Number(SEED, label="Seed", precision=0, minimum=0)
    return model, targets, rank, alpha, steps, rate, seed


def _outputs(method: str):
    status, plot, mask, texts, file, data = shipped_views(method)
    with gr.Row():
        run = gr.Button("Train live", variant="primary", elem_id=f"ft-{method}-run")
        stop = gr.Button("Stop", variant="stop", elem_id=f"ft-{method}-stop", elem_classes=["stop-button"])
    status = gr.Markdown(status, elem_id=f"ft-{method}-status")
    plot = gr.Plot(plot, label="Training", elem_id=f"ft-{method}-plot")
    mask = gr.HTML(mask, elem_id=f"ft-{method}-mask", visible=method != "lora")
    texts = gr.HTML(texts, elem_id=f"ft-{method}-texts")
    with gr.Accordion("Data (JSON)", open=False):
        file = gr.DownloadButton("Download JSON", value=file, size="sm")
        data = gr.JSON(data, label=method)
    return run, stop, [status, plot, mask, texts, file, data]


def _wire(run, stop, fn, inputs, outputs, api_name: str) -> None:
    event = run.click(fn, inputs=inputs, outputs=outputs, api_name=api_name,
                      show_progress="full")
    stop.click(None, cancels=[event], api_visibility="private")


def _steps_range(model):
    base = model if model in STEPS else GPT
    return gr.update(maximum=STEPS[base][1], value=STEPS[base][0])


def build(demo: gr.Blocks, shared: Shared) -> None:
    gr.Markdown(INTRO_MD, latex_delimiters=[{"left": "$", "right": "$", "display": False}])
    llm = SMOLLM2 if models.resolve(SMOLLM2) is not None else GPT
    with gr.Tabs():
        with gr.Tab("LoRA", id="lora"):
            gr.Markdown(LORA_MD)
            model, targets, rank, alpha, steps, rate, seed = _controls("lora", GPT)
            text = gr.Textbox(finetune_data.default_text(), label="Text to train on", lines=6, max_lines=12)
            run, stop, outputs = _outputs("lora")
            _wire(run, stop, lora_finetune, [model, targets, rank, alpha, steps, rate, text, seed], outputs,
                  "lora_finetune")
            model.change(_steps_range, model, steps, queue=False, api_visibility="private")
        for method, md, fn in (("sft", SFT_MD, sft), ("dpo", DPO_MD, dpo)):
            with gr.Tab(method.upper(), id=method):
                gr.Markdown(md, latex_delimiters=[{"left": "$", "right": "$", "display": False}])
                model, targets, rank, alpha, steps, rate, seed = _controls(method, llm)
                beta = [gr.Slider(0.01, 1.0, 0.1, step=0.01, label="β")] if method == "dpo" else []
                run, stop, outputs = _outputs(method)
                _wire(run, stop, fn, [model, targets, rank, alpha, *beta, steps, rate, seed], outputs, method)
                model.change(_steps_range, model, steps, queue=False, api_visibility="private")
        with gr.Tab("Classify", id="classify"):
            classify_tab.build(demo)
