"""Why this label: a typed sentence classified by every shipped classifier, and the reasons one can compute.

For each method (nets/classifier.py: an LSTM and a BiLSTM from scratch; MiniLM, then our own BERT, with a linear probe
on [CLS] or on the mean, with LoRA, or with the top block fine-tuned) the probability of each class. For one transfer
classifier, per-token attributions of the predicted class's logit f_y:

- gradient × input: Σ_c e_tc ∂f_y/∂e_tc, e_t the token embedding E_tok[x_t] of token t (Shrikumar et al. 2016);
- integrated gradients (Sundararajan et al. 2017): Σ_c (e_tc - e'_tc) (1/m) Σ_k ∂f_y/∂e_tc at e' + (k/m)(e - e'),
  the baseline e' = 0 for every token embedding (position and segment embeddings kept as they are), m steps of a
  right Riemann sum; completeness, Σ_t IG_t = f_y(e) - f_y(e'), is reported with the gap;
- beside them, the last layer's attention from [CLS] to each token (mean of the heads): where [CLS] reads from, shown
  as what it is, not as an explanation (Jain & Wallace 2019).

And the LSTM's prediction after each word: the head read at every h_t, the many-to-one model read step by step.
The models come from the registry (analysis/models.py), each loaded once; nothing here is stored between calls.
"""

from __future__ import annotations

import re

import torch

from playground import checkpoints
from playground.analysis import models
from playground.nets.classifier import METHODS, RECURRENT, init_head

PREFIX = "classify-"
ORDER = METHODS                  # from scratch first, then transfer from MiniLM, then from our BERT
_WAYS = {"probe-cls": "frozen + probe on [CLS]", "probe-mean": "frozen + probe on the mean",
         "lora": "+ LoRA + head on [CLS]", "finetune": "top block fine-tuned + head on [CLS]"}
NAMES = {"lstm": "LSTM (from scratch)", "bilstm": "BiLSTM (from scratch)",
         **{way: f"MiniLM {said}" for way, said in _WAYS.items()},
         **{f"bert-{way}": f"our BERT {said}" for way, said in _WAYS.items()}}
MAX_TOKENS = 64            # MiniLM tokens a sentence is cut to (the models trained on at most 64)
IG_STEPS = 16             # integrated gradients' default points on the path (each one a forward and backward pass)
BASELINE = "every token embedding E_tok[x_t] set to 0 (position and segment embeddings kept)"
ENGLISH_ONLY = ("Every classifier here learnt from English sentences of five corpora (Austen, Shakespeare, the World "
                "English Bible, the Jargon File, WordNet's glosses); it still answers for any text, by the nearest "
                "thing it knows.")


def available() -> list[str]:
    """The shipped classifiers' ids, in ORDER."""
    found = set(checkpoints.available("classifier"))
    return [PREFIX + m for m in ORDER if PREFIX + m in found]


def attributable() -> list[str]:
    """The shipped transfer classifiers' ids: the ones with attributions (a recurrent one has words, not WordPiece)."""
    return [i for i in available() if i[len(PREFIX):] not in RECURRENT]


def _words(model, text: str) -> tuple[list[str], list[int]]:
    """The words as typed (an unknown one is read as [UNK], but shown as it is) and their ids."""
    enc = model.tokenizer.encode(text)
    return [text[a:b] for a, b in enc.offsets[:MAX_TOKENS]], enc.ids[:MAX_TOKENS]


def default_attributed() -> str | None:
    """The classifier whose attributions are shown unless another is chosen: MiniLM's LoRA one, when shipped."""
    choices = attributable()
    return PREFIX + "lora" if PREFIX + "lora" in choices else (choices[0] if choices else None)


def _ids(model, text: str) -> tuple[list[str], torch.Tensor]:
    """A transfer classifier's tokens of `text` ([CLS] ... [SEP], by its base's WordPiece) and their ids (1, T)."""
    enc = model.tokenizer.encode(text)
    tokens, ids = enc.tokens, enc.ids
    if len(ids) > MAX_TOKENS:                        # keep [SEP] last, as in training
        tokens, ids = tokens[: MAX_TOKENS - 1] + tokens[-1:], ids[: MAX_TOKENS - 1] + ids[-1:]
    return tokens, torch.tensor([ids])


def _probs(name: str, text: str) -> list[float]:
    m = _model(name)
    with torch.inference_mode():
        if m.config.method in RECURRENT:
            _, ids = _words(m, text)
            logits = m.model(torch.tensor([ids or [0]]))
        else:
            logits = m.model(_ids(m.model, text)[1])
    return [round(float(p), 5) for p in logits.softmax(-1)[0]]


def notices_for(text: str) -> list[str]:
    """What the view says about the input: not English-looking, emoji, cut to MAX_TOKENS."""
    notes = []
    letters = re.findall(r"[^\W\d_]", text)
    if letters and sum(c.isascii() for c in letters) / len(letters) < 0.8:
        notes.append("Most letters here are not English ones. " + ENGLISH_ONLY)
    if re.search("[\U0001F300-\U0001FAFF\u2600-\u27BF]", text):
        notes.append("Emoji are outside every model's vocabulary: MiniLM reads them as [UNK], the LSTMs as unknown "
                     "words.")
    if len(models.tokenizer(models.MINILM).encode(text).ids) > MAX_TOKENS:
        notes.append(f"The text is longer than {MAX_TOKENS} MiniLM tokens: the first {MAX_TOKENS - 2} are classified "
                     "(the models trained on sentences of 4-40 words).")
    return notes


def _model(name: str) -> models.Model:
    """A classifier by its id, or (tests, scripts) by its checkpoint folder."""
    found = models.find(name)
    if found is None or found.kind != "classifier":
        raise LookupError(f"no classifier {name!r}; shipped: {', '.join(available()) or 'none'}")
    return found


def attributions(name: str, text: str, steps: int = IG_STEPS) -> dict:
    """Gradient × input, integrated gradients (`steps` points on the path; 0: none, the gradient at the input only,
    one backward pass instead of `steps`) and attention from [CLS] for transfer classifier `name`
    (MiniLM's or our BERT's), per token."""
    m = _model(name)
    model = m.model
    tokens, idx = _ids(model, text)
    with torch.inference_mode():
        logits, internals = model(idx, return_internals=True)
        e = model.bert.embeddings.tok(idx)                          # (1, T, C): E_tok[x_t]
    y = int(logits[0].argmax())
    # a right Riemann sum over (0, 1]: its last point, α = 1, is the input itself (gradient × input's gradient)
    alphas = torch.arange(1, steps + 1, dtype=torch.float32) / steps if steps else torch.ones(1)
    with torch.inference_mode(False), torch.enable_grad():
        e = e.clone()
        points = (alphas[:, None, None] * e).requires_grad_(True)   # (m, T, C) on the straight path from e' = 0
        f = model(idx.expand(len(alphas), -1), inputs_embeds=points)[:, y]    # (m,) f_y along the path
        grads, = torch.autograd.grad(f.sum(), points)                         # (m, T, C)
        f0 = float(model(idx, inputs_embeds=torch.zeros_like(e))[0, y]) if steps else None
    gxi = (e[0] * grads[-1]).sum(-1)                                # α = 1: the gradient at the input itself
    attn = internals["layers"][-1]["attn"][0, :, 0].mean(0)         # (T,): [CLS]'s row, mean of the heads
    f1 = float(logits[0, y])
    out = {"model": name, "tokens": tokens, "target": m.config.classes[y], "logit": round(f1, 4),
           "grad_x_input": _r(gxi), "integrated_gradients": None, "ig_steps": steps, "baseline": BASELINE,
           "completeness": None, "attention_from_cls": _r(attn),
           "attention_note": "the last layer's attention weights from [CLS] to each token, the mean of its heads: "
                             "where [CLS] reads from, not an explanation of the label"}
    if steps:
        ig = (e[0] * grads.mean(0)).sum(-1)                         # (T,)
        out["integrated_gradients"] = _r(ig)
        out["completeness"] = {"sum_ig": round(float(ig.sum()), 4), "f_input_minus_f_baseline": round(f1 - f0, 4)}
    return out


def _r(t: torch.Tensor) -> list[float]:
    return [round(float(v), 5) for v in t.detach()]


def lstm_steps(text: str) -> dict | None:
    """The LSTM's class probabilities after each word (None when it is not shipped)."""
    name = PREFIX + "lstm"
    if name not in available():
        return None
    m = models.get(name)
    words, ids = _words(m, text)
    if not ids:
        return None
    with torch.inference_mode():
        _, per_step = m.model(torch.tensor([ids]), return_steps=True)
    return {"model": name, "words": words,
            "probs": [[round(float(p), 5) for p in row] for row in per_step[0].softmax(-1)]}


def classify(text: str, model: str | None = None, ig_steps: int = IG_STEPS) -> dict:
    """Every shipped classifier's class probabilities for `text`, the attributions of one transfer classifier
    (`model`; the LoRA one by default), the LSTM's reading word by word, and the notices. `text` is clean
    (ui.common.text_input) and not empty."""
    names = available()
    if not names:
        raise LookupError("No classifier is shipped: train one with python -m playground.train classifier")
    choices = attributable()
    model = model or default_attributed()
    if model is not None and model not in choices:
        raise ValueError(f"{model!r} is not a transfer classifier (MiniLM's or our BERT's); "
                         f"choose one of {', '.join(choices)}")
    classes = models.get(names[0]).config.classes
    methods = []
    for name in names:
        card = models.card(name)
        methods.append({"id": name, "method": NAMES[name[len(PREFIX):]], "probs": _probs(name, text),
                        "held_out_accuracy": card.get("held_out", {}).get("accuracy")})
    for row in methods:
        row["prediction"] = classes[max(range(len(classes)), key=row["probs"].__getitem__)]
    return {"text": text, "classes": classes, "methods": methods,
            "attribution": attributions(model, text, ig_steps) if model else None,
            "steps": lstm_steps(text), "notices": notices_for(text), "trained_on": ENGLISH_ONLY}


# ---------------------------------------------------------------------------------------------
# The lecture's picture: held-out accuracy against labelled examples (shipped), and a probe re-run live

CURVE = checkpoints.ASSETS_DIR / "classify" / "curve.json"
LIVE_SIZES = (16, 64, 256)
_held_out_features: dict[str, tuple] = {}   # MiniLM's features of the held-out split, computed once per process


def curve() -> dict | None:
    """The curve measured by tools/classify_curve.py (its protocol, recipes, points), or None before it is run."""
    import json

    return json.loads(CURVE.read_text(encoding="utf-8")) if CURVE.is_file() else None


def probe_live(n: int, pooling: str, seed: int, progress=lambda done, total, what: None) -> dict:
    """A linear probe on MiniLM's [CLS] or mean features, trained now on n labelled examples (the training split's
    seeded draw, as tools/classify_curve.py draws them) and measured on the whole held-out split: one point of the
    curve, computed in front of the user. The held-out features are computed on the first run, then kept (the
    encoder is frozen: every later run would compute the same numbers)."""
    from playground.training import classify as tc

    assert n in LIVE_SIZES, f"n must be one of {LIVE_SIZES}"
    assert pooling in ("cls", "mean"), "pooling must be cls or mean"
    data = tc.load_examples()
    classes = list(dict.fromkeys(e["label"] for e in data["train"]))
    encoder = models.get(models.MINILM).model
    tok = models.tokenizer(models.MINILM)
    if "held_out" not in _held_out_features:
        progress(0, 3, "encoding the 1,000 held-out sentences with MiniLM (first run only)")
        _held_out_features["held_out"] = tc.features(encoder, tok, [e["text"] for e in data["held_out"]], 64)
    picked = tc.draw(data["train"], n, seed)
    progress(1, 3, f"encoding the {n} labelled sentences")
    train = tc.features(encoder, tok, [e["text"] for e in picked], 64)
    which = 0 if pooling == "cls" else 1
    gold = torch.tensor([classes.index(e["label"]) for e in picked])
    held_gold = torch.tensor([classes.index(e["label"]) for e in data["held_out"]])
    steps, lr, _ = tc.DEFAULTS[f"probe-{pooling}"]
    with torch.inference_mode(False), torch.enable_grad():
        head = init_head(torch.nn.Linear(encoder.config.n_embd, len(classes)), torch.Generator().manual_seed(seed))
        progress(2, 3, f"training the probe ({steps} full-batch steps)")
        x = train[which].clone()
        tc.train_head(head, x, gold, steps, lr, tc.ClassifyTrainConfig().weight_decay)
        with torch.no_grad():
            result = tc.evaluate(head(_held_out_features["held_out"][which].clone()), held_gold)
    return {"n": n, "pooling": pooling, "seed": seed, "method": f"probe-{pooling}", **result,
            "protocol": "the held-out split's 1,000 sentences; n drawn evenly per class from the training split with "
                        "this seed (tools/classify_curve.py's draw); the head trained as training/classify.py does"}


TRAIN_LIVE = (16, 64)     # the small-label points any other method re-measures live


def live_methods() -> list[str]:
    """The methods a live run trains whole (MiniLM's probes have probe_live, on features kept between runs)."""
    return [m for m in METHODS if m not in ("probe-cls", "probe-mean")]


def train_live(method: str, n: int, seed: int, progress=lambda done, total, what: None) -> dict:
    """One small-label point of `method`'s curve, trained now from its start (training/classify.py's recipe, the
    training split's seeded draw of n examples, as tools/classify_curve.py runs it) and measured on the whole
    held-out split: the script's number for the same method, n and seed, computed in front of the user."""
    from playground.training import classify as tc

    assert method in live_methods(), f"method must be one of {', '.join(live_methods())}"
    assert n in TRAIN_LIVE, f"n must be one of {TRAIN_LIVE}"

    def step(i: int, total: int) -> None:
        progress(i, total + 1, f"training step {i} of {total}" if i < total else
                 "measuring it on the 1,000 held-out sentences")

    result = tc.run(method, tc.ClassifyTrainConfig(n_train=n), seed, tc.load_examples(), progress=step)
    return {"n": result["n_train"], "method": method, "seed": seed, **result["held_out"], "steps": result["steps"],
            "seconds": result["seconds"],
            "protocol": "the held-out split's 1,000 sentences; n drawn evenly per class from the training split with "
                        "this seed (tools/classify_curve.py's draw); trained from its start by training/classify.py's "
                        "recipe for the method (DEFAULTS), as the curve's points were"}
