"""What the Seq2seq attention tab shows, as plain data: translations with their alignment, one decoder step,
the Transformer's cross-attention beside a recurrent alignment, and accuracy against source length.

The models are the encoder-decoders of playground/nets/seq2seq.py on the task of playground/training/seq2seq.py
(numbers in English words into digits). Every alignment comes from the one introspection contract: the decoder's
attention over the source is `internals["cross"]["layers"]`, one block per layer with attn (B, nh, T_out, T_src);
a recurrent score function is one head, so no function here asks which family a model is.

A function named after an endpoint returns that endpoint's JSON (rounded numbers, lists) and, where a figure
draws unrounded numbers, the arrays beside it.
"""

from __future__ import annotations

import random

import numpy as np
import torch

from playground.analysis import models
from playground.nets import seq2seq as s2s
from playground.nets import seq2seq_decoding as decoding
from playground.training import seq2seq as task

UNIFORM = "bahdanau-uniform"  # the quick evaluation's knockout: Bahdanau's model with uniform weights
LABELS = {"none": "no attention (fixed context)", "bahdanau": "Bahdanau (additive)", "dot": "Luong dot",
          "general": "Luong general", "transformer": "Transformer",
          UNIFORM: "Bahdanau, attention knocked out (every weight 1/T)"}
EVAL_LENGTHS = [4, 12, 20, 28, 36, 44]   # the quick evaluation: a few lengths, two of them past training


def variants() -> list[str]:
    """The variants whose encoder-decoder the registry has (analysis/models.py: `seq2seq-<variant>`, whole
    checkpoints only), in nets/seq2seq.VARIANTS' order. Nothing is loaded."""
    return [variant for variant in s2s.VARIANTS if models.resolve(f"seq2seq-{variant}") is not None]


def model(variant: str) -> models.Model:
    """The shipped encoder-decoder of `variant`, from the registry (loaded on first use, shared, read-only), its
    card checked against the task's vocabulary; a KeyError when it is not shipped."""
    m = models.get(f"seq2seq-{variant}")
    task.check_vocab(m.card)
    return m


def _decode(model, ids: list[int], beam: int) -> dict:
    """Decode one source (greedy when beam is 1); then one teacher-forced pass over the output for the attention
    it was made with: alpha (T_out, T_src), the last layer's cross-attention averaged over heads (None without
    attention), and cross (L, nh, T_out, T_src), every layer's."""
    src = torch.tensor([ids])
    max_len = task.max_output(len(ids))
    with torch.inference_mode():
        if beam > 1:
            out = decoding.beam_decode(model, src, beam, max_len)[0][0]
        else:
            out = decoding.greedy(model, src, max_len)[0][0].tolist()
            if task.EOS in out:
                out = out[:out.index(task.EOS) + 1]
        tgt_in = torch.tensor([[task.BOS] + out[:-1]])
        logits, _, internals = model(src, tgt_in, return_internals=True)
        logps = torch.log_softmax(logits[0].float(), dim=-1)[torch.arange(len(out)), torch.tensor(out)]
    cross = [block["attn"][0] for block in internals["cross"]["layers"]]   # each (nh, T_out, T_src)
    return {"ids": out, "tokens": [task.TGT_VOCAB[i] for i in out], "log_prob": float(logps.sum()),
            "alpha": cross[-1].mean(0).numpy() if cross else None,
            "cross": torch.stack(cross).numpy() if cross else None}


def _alignment(alpha: np.ndarray | None) -> list | None:
    return None if alpha is None else np.round(alpha, 5).tolist()


def translate(model, key: str, words: list[str], ids: list[int], beam: int, notices: list[str]) -> tuple[dict, dict]:
    """The JSON of /seq2seq for one source, and the arrays behind the figures: tokens, alpha (T_out, T_src) or
    None, log_prob (unrounded)."""
    r = _decode(model, ids, beam)
    output = task.decode_target(r["ids"])
    ref = task.reference(words)
    data = {"model": key, "source_tokens": words, "output": output, "output_tokens": r["tokens"],
            "alignment": _alignment(r["alpha"]),
            "alignment_format": "output token × source word (rows sum to 1)" if r["alpha"] is not None
            else "none: this model reads one fixed context vector at every step",
            "reference": ref, "correct": None if ref is None else output == ref, "log_prob": round(r["log_prob"], 5),
            "decoding": "greedy" if beam == 1 else f"beam {beam}", "notices": notices}
    return data, {"tokens": r["tokens"], "alpha": r["alpha"], "log_prob": r["log_prob"]}


def decoder_step(source: list[str], tokens: list[str], alignment: list | None, i: int) -> dict:
    """The JSON of /seq2seq_step: output token i and its weights over the source (None without attention)."""
    return {"step": i, "token": tokens[i], "source_tokens": source,
            "weights": None if alignment is None else alignment[i]}


def compare(rnn_model, rnn_key: str, transformer, words: list[str], ids: list[int], layer: int,
            notices: list[str]) -> tuple[dict, dict]:
    """The JSON of /seq2seq_compare: a recurrent model's alignment and the Transformer's cross-attention in one
    decoder layer, both greedy on the same source; beside it the arrays (rnn tokens and alpha, transformer tokens
    and cross (nh, T_out, T_src))."""
    a, t = _decode(rnn_model, ids, 1), _decode(transformer, ids, 1)
    cross = t["cross"][layer]                                      # (nh, T_out, T_src)
    data = {"source_tokens": words,
            "rnn": {"model": rnn_key, "output": task.decode_target(a["ids"]), "output_tokens": a["tokens"],
                    "alignment": _alignment(a["alpha"])},
            "transformer": {"output": task.decode_target(t["ids"]), "output_tokens": t["tokens"], "layer": layer,
                            "heads": int(cross.shape[0]), "cross_attention_format": "head × output × source",
                            "cross_attention": np.round(cross, 5).tolist()},
            "notices": notices}
    return data, {"rnn_tokens": a["tokens"], "rnn_alpha": a["alpha"], "tokens": t["tokens"], "cross": cross}


def bottleneck(keys: list[str]) -> dict:
    """The JSON of /seq2seq_bottleneck: accuracy by source-length bucket as the card.json of each variant's model
    recorded it at training time (read without loading the models; those without that record are left out)."""
    series = {}
    for key in keys:
        acc = models.card(f"seq2seq-{key}").get("accuracy_by_length")
        if acc:
            series[key] = {"length": [(lo + hi) / 2 for lo, hi in acc["buckets"]], "accuracy": acc["accuracy"],
                           "buckets": acc["buckets"], "per_bucket": acc["per_bucket"]}
    return {"source": "card.json of each model", "trained_up_to": task.MAX_TRAIN_LEN, "models": series}


def evaluate(nets: dict[str, torch.nn.Module], per_length: int, seed: int) -> dict:
    """The JSON of /seq2seq_evaluate: exact match now, per_length fresh held-out sources at each of EVAL_LENGTHS, for
    each model (variant -> encoder-decoder), and for Bahdanau's also with its attention knocked out (UNIFORM)."""
    series = {}
    with torch.inference_mode():
        for key, net in nets.items():
            acc = task.accuracy_by_length(net, EVAL_LENGTHS, per_length, seed=seed + 1)  # seed 0: the cards'
            series[key] = {"length": EVAL_LENGTHS, "accuracy": [round(a, 4) for a in acc]}
            if key == "bahdanau":  # the same model, attention knocked out: does it fall to the no-attention model's?
                acc = task.accuracy_by_length(net, EVAL_LENGTHS, per_length, seed=seed + 1, uniform=True)
                series[UNIFORM] = {"length": EVAL_LENGTHS, "accuracy": [round(a, 4) for a in acc]}
    return {"source": "evaluated now", "per_length": per_length, "seed": seed, "trained_up_to": task.MAX_TRAIN_LEN,
            "models": series}


def random_source(seed=None) -> str:
    """A held-out source of a random length (up to the longest test bucket)."""
    rng = random.Random(seed)
    return " ".join(task.sample(rng.randint(3, task.BUCKETS[-1][1]), rng, test=True)[0])
