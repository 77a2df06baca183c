"""The tools a workshop question may be graded against: the right answer is what the app computes, at grading time.

A workshop file names a tool and its arguments (docs/workshops.md), e.g. `tool: tokens` with
`args: {tokenizer: bpe, text: "{input}"}`: the answer is the number of tokens our byte-level BPE makes of what the
student typed. Each tool is a function over the analysis layer (the tokenizers, the BPE trace, the heads'
statistics, the gradient flow, the masked LM, ...), never over the UI, and returns the answer as text with a
sentence saying how it was found. The registry is small and named on purpose: a file can only ask for what is here,
and `problems` checks a file's arguments (types, the models they name) when the workshop is loaded, so a removed
model is reported before the lecture rather than during it.

The Class quiz's twelve questions (assets/workshops/quiz.yaml, read by analysis/exercises.py) are graded by these
same tools; their answers and explanations are the quiz's.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np
import torch

from playground.analysis import attention as att
from playground.analysis import fill_mask as fm
from playground.analysis import gradient_flow, heads, induction, models, subwords, tokenization
from playground.analysis import vocabularies as vocab
from playground.analysis.embeddings import words

INPUT = "{input}"          # in an argument: the student's own text (the question's `input`)
MAX_INPUT = 200            # characters of a student's input a tool reads
ATTENTION_FAMILIES = ("gpt", "bert", "llama")


class ToolError(Exception):
    """A tool that cannot answer (an unknown tool, a missing model, an argument out of range): the message says why."""


@dataclass(frozen=True)
class Tool:
    name: str
    kind: str                          # "number" (a number, or a word such as 'never') or "text" (a word, a token)
    params: dict[str, type]            # each argument and the type a file gives it
    about: str                         # one line for docs/workshops.md and the load messages
    run: Callable[..., tuple[str, str]]   # (**args) -> (the answer, why)
    models: tuple[str, ...] = ()       # the arguments that name a model of the registry


def _shipped(name: str) -> models.Model:
    """A model of the registry the answer is computed with; an error when it is not shipped here."""
    if models.resolve(name) is None:
        raise ToolError(f"{name} is not shipped here")
    return models.get(name)


def tokens(tokenizer: str, text: str) -> tuple[str, str]:
    """How many tokens a shipped tokenizer makes of `text` (the Tokenization tab's count)."""
    enc = tokenization.encode(tokenization.load(tokenizer), text)
    return str(enc["n_tokens"]), f"{tokenizer} splits {text!r} into {enc['n_tokens']}: {' | '.join(enc['tokens'])}."


def bpe_merge(table: str, step: int) -> tuple[str, str]:
    """The pair classic BPE merges at `step` (1: the first) on a word-frequency table."""
    trace = subwords.trace(table, step)["merges"]
    if len(trace) < step:
        raise ToolError(f"BPE makes only {len(trace)} merges of this table, not {step}")
    done = ", ".join("".join(m["pair"]) for m in trace[:step - 1])
    m = trace[step - 1]
    before = f"After the merges {done}, the" if done else "The"
    return "".join(m["pair"]), (f"{before} most frequent adjacent pair is {m['pair'][0]} + "
                                f"{m['pair'][1]} ({m['count']} times): it becomes {m['new_symbol']!r}.")


def premium(vocabulary: str, language: str) -> tuple[str, str]:
    """The premium a language of the multilingual sample pays in a real vocabulary: its tokens over English's for the
    same declaration (the Real vocabularies view's heatmap)."""
    if vocabulary not in vocab.available():
        raise ToolError(f"the vocabulary {vocabulary!r} is not available here; "
                        f"choose from {', '.join(vocab.available())}")
    rows = {r["language"]: r for r in vocab.premium_table([vocabulary])["rows"]}
    if language not in rows:
        raise ToolError(f"no language {language!r} in the sample; choose from {', '.join(rows)}")
    r, label = rows[language], vocab.VOCABULARIES[vocabulary].label
    return f"{r['premium']:.2f}", (f"{label} needs {r['tokens']:,} tokens for the declaration in {language!r} and "
                                   f"{rows[vocab.BASE]['tokens']:,} in English: a premium of ×{r['premium']:.2f}.")


TOP_HEAD_SAYS = {"previous": "of each token's attention on the token before it",
                 "first": "of each token's attention on the first token",
                 "duplicate": "of each token's attention on earlier copies of itself",
                 "induction": "of each token's attention on the token after an earlier copy of itself"}


def top_head(model: str, text: str, layer: int, statistic: str = "previous") -> tuple[str, str]:
    """The head of `layer` with the largest statistic of analysis/heads.py over `text` (the head finder's numbers)."""
    if statistic not in TOP_HEAD_SAYS:
        raise ToolError(f"statistic should be one of {', '.join(TOP_HEAD_SAYS)}, not {statistic!r}")
    m = att.load(model)
    if not 0 <= layer < m.n_layer:
        raise ToolError(f"{m.key} has layers 0 to {m.n_layer - 1}, not {layer}")
    enc = att.encode(m, text)
    table = heads.stats(att.attention(m, enc), enc.ids)[statistic]
    if table is None:
        raise ToolError(f"the text has no repeated token, so no head has a {statistic} score")
    scores = table[layer]
    best = int(np.argmax(scores))
    name = "MiniLM" if m.key == models.MINILM else m.label.split(" (")[0]
    return str(best), (f"In {name}'s layer {layer}, head {best} puts {scores[best]:.0%} {TOP_HEAD_SAYS[statistic]} "
                       f"(the next best head: {np.sort(scores)[-2]:.0%}).")


def gradient_step(cell: str, text: str, threshold: float = 1e-3, steps: int = 100) -> tuple[str, str]:
    """How many steps before the last character |dL_T/dh_t| of a shipped recurrent LM falls below `threshold`."""
    ckpt = _shipped(f"{cell}-shakespeare")
    data, _ = gradient_flow.compare({cell: ckpt.model}, ckpt.tokenizer, text, steps)
    norms = np.array(data["cells"][cell]["grad_norms"], dtype=float)          # |dL_T/dh_t|, t = 1..T
    below = np.flatnonzero(norms[::-1] < threshold)                              # steps back from T
    if not len(below):
        return "never", (f"Over all {steps} steps the {cell.upper()}'s gradient stays above {threshold:g} "
                         f"(smallest: {norms.min():.1e}).")
    back = int(below[0])
    return str(back), (f"|∂L_T/∂h_t| of the {cell.upper()} falls below {threshold:g} {back} steps before the last "
                       f"character (t = {steps - back}); at the start it is {norms[0]:.1e}.")


def analogy(a: str, b: str, c: str) -> tuple[str, str]:
    """The first answer of a − b + c in our word2vec (3CosAdd, the inputs left out: the Embeddings tab's analogy)."""
    space = words.word2vec_space()
    if space is None:
        raise ToolError("word2vec-english is not shipped here")
    notices: list[str] = []
    answers = words.analogy(space, a, b, c, notices, k=5)["answers"]
    if not answers:
        raise ToolError(" ".join(notices) or f"no answer for {a} − {b} + {c}")
    return answers[0]["word"], (f"Our word2vec's five nearest words to {a} − {b} + {c} (3CosAdd, the inputs left "
                                "out): " + ", ".join(f"{x['word']} ({x['score']:.2f})" for x in answers) + ".")


@torch.no_grad()
def next_token(model: str, prompt: str) -> tuple[str, str]:
    """A causal LM's most probable next token after `prompt` (the Generation tab's first step)."""
    ckpt = _shipped(model)
    if ckpt.family not in ("gpt", "rnn", "lstm", "gru"):
        raise ToolError(f"{model} is not one of our small causal LMs")
    ids = torch.tensor([ckpt.tokenizer.encode(prompt).ids])
    if ids.shape[1] == 0:
        raise ToolError("the prompt has no token this model reads")
    probs = torch.softmax(ckpt.model(ids)[0][0, -1], -1)
    top = probs.topk(3)
    shown = [(ckpt.tokenizer.id_to_token(int(i)), float(p)) for p, i in zip(top.values, top.indices)]
    return shown[0][0], (f"Our {ckpt.family.upper()}'s most probable next characters: " +
                         ", ".join(f"{c!r} ({p:.0%})" for c, p in shown) + ".")


def fill_mask(model: str, text: str) -> tuple[str, str]:
    """A masked LM's first guess for the [MASK] of `text` (the Masked-LM fill-in tab's top word)."""
    if "[MASK]" not in text:
        raise ToolError("the text needs a [MASK]")
    ckpt = _shipped(model)
    pred = fm.fill_mask(ckpt.model, ckpt.tokenizer, text, top_k=5)
    first = pred[0] if pred and isinstance(pred[0], list) else pred               # several masks: the first one's
    top = [p["token_str"] for p in first]
    return top[0], f"{model}'s five most probable words: {', '.join(top)}."


def seq2seq_limit(model: str = "seq2seq-none") -> tuple[str, str]:
    """The longest source length a seq2seq model still translates at least half of exactly (its card's held-out
    accuracy by length, which the Seq2seq tab shows)."""
    card = models.card(model) if models.resolve(model) else {}
    acc = card.get("accuracy_by_length") or {}
    if not acc:
        raise ToolError(f"{model} is not shipped here, or its card has no accuracy by length")
    for (low, high), a in zip(acc["buckets"], acc["accuracy"]):
        if a < 0.5:
            return str(low - 1), (f"Without attention, exact match falls below 50% for sources of {low}–{high} words "
                                  f"({a:.0%}); up to {low - 1} words it is at least 50% (held-out, "
                                  f"{card['held_out']['per_length']} "
                                  "sources per length).")
    return "never", "Without attention the model stays above 50% at every length measured."


def induction_head(model: str = "gpt-shakespeare", layer: int = 1, n: int = induction.DEFAULT_N,
                   seed: int = induction.DEFAULT_SEED) -> tuple[str, str]:
    """The head of `layer` with the largest induction score on a seeded random sequence repeated (the Attention
    tab's induction view)."""
    m = att.load(model)
    if m.family not in ("gpt", "llama"):
        raise ToolError(f"{model} is not a causal LM: induction needs one")
    if not 0 <= layer < m.n_layer:
        raise ToolError(f"{m.key} has layers 0 to {m.n_layer - 1}, not {layer}")
    r = induction.induction(m.model, m.tokenizer, m.family, n, seed)
    scores = np.asarray(r["induction"])[layer]
    best = int(np.argmax(scores))
    return str(best), (f"On {n} random tokens seen twice (seed {seed}), head {best} of layer {layer} puts "
                       f"{scores[best]:.0%} of its attention on the token after the earlier copy (the next best: "
                       f"{np.sort(scores)[-2]:.0%}).")


TOOLS = {t.name: t for t in [
    Tool("tokens", "number", {"tokenizer": str, "text": str}, "how many tokens a tokenizer makes of a text", tokens),
    Tool("bpe_merge", "text", {"table": str, "step": int}, "the pair classic BPE merges at a step", bpe_merge),
    Tool("premium", "number", {"vocabulary": str, "language": str},
         "a language's tokens over English's for the same text, in a real vocabulary", premium),
    Tool("top_head", "number", {"model": str, "text": str, "layer": int, "statistic": str},
         "the head of a layer with the largest statistic (previous, first, duplicate, induction)", top_head,
         ("model",)),
    Tool("gradient_step", "number", {"cell": str, "text": str, "threshold": float, "steps": int},
         "steps back before a recurrent LM's gradient falls below a threshold (or 'never')", gradient_step),
    Tool("analogy", "text", {"a": str, "b": str, "c": str}, "word2vec's first answer to a − b + c", analogy),
    Tool("next_token", "text", {"model": str, "prompt": str}, "a causal LM's most probable next token", next_token,
         ("model",)),
    Tool("fill_mask", "text", {"model": str, "text": str}, "a masked LM's first word for [MASK]", fill_mask,
         ("model",)),
    Tool("seq2seq_limit", "number", {"model": str}, "the longest source seq2seq translates half of exactly",
         seq2seq_limit, ("model",)),
    Tool("induction_head", "number", {"model": str, "layer": int, "n": int, "seed": int},
         "the head of a layer with the largest induction score", induction_head, ("model",)),
]}
REQUIRED = {"tokens": {"tokenizer", "text"}, "bpe_merge": {"table", "step"}, "premium": {"vocabulary", "language"},
            "top_head": {"model", "text", "layer"},
            "gradient_step": {"cell", "text"}, "analogy": {"a", "b", "c"}, "next_token": {"model", "prompt"},
            "fill_mask": {"model", "text"}, "seq2seq_limit": set(), "induction_head": set()}


def missing_models(name, args) -> list[tuple[str, str]]:
    """The models a tool's arguments name that this app does not have (a damaged or removed checkpoint), as
    (field, message) pairs; [] for an unknown tool or arguments that are not a mapping (`problems` says those)."""
    if name not in TOOLS or not isinstance(args, dict):
        return []
    return [(f"args.{key}", f"the model {args[key][:40]!r} is not available here") for key in TOOLS[name].models
            if isinstance(args.get(key), str) and INPUT not in args[key] and models.resolve(args[key]) is None]


def problems(name, args) -> list[tuple[str, str]]:
    """What is wrong with a file's tool and arguments, as (field, message) pairs; [] when it can be run. Checked when
    a workshop is loaded: an unknown tool, a missing, unknown or mistyped argument, a model or tokenizer this app
    does not have."""
    if name not in TOOLS:
        return [("tool", f"unknown tool {str(name)[:40]!r}; the tools are {', '.join(TOOLS)}")]
    tool = TOOLS[name]
    if not isinstance(args, dict):
        return [("args", f"should be a mapping of argument names to values ({', '.join(tool.params)})")]
    found = [(f"args.{k}", f"{tool.name} takes no argument {str(k)[:40]!r}; it takes {', '.join(tool.params)}")
             for k in args if k not in tool.params]
    found += [("args", f"{tool.name} needs the argument {k!r}") for k in sorted(REQUIRED[name] - set(args))]
    for key, kind in tool.params.items():
        if key in args and not _typed(args[key], kind):
            what = {str: "text", int: "a whole number", float: "a number"}[kind]
            found.append((f"args.{key}", f"should be {what}, not {str(args[key])[:40]!r}"))
    found += missing_models(name, args)
    if name == "tokens" and isinstance(args.get("tokenizer"), str) and args["tokenizer"] not in tokenization.SPECS:
        found.append(("args.tokenizer", f"unknown tokenizer {args['tokenizer'][:40]!r}; choose from "
                                        f"{', '.join(tokenization.SPECS)}"))
    if name == "premium" and args.get("vocabulary") not in vocab.VOCABULARIES:
        found.append(("args.vocabulary", f"should be one of {', '.join(vocab.VOCABULARIES)}"))
    if name == "gradient_step" and args.get("cell") not in ("rnn", "lstm", "gru"):
        found.append(("args.cell", "should be rnn, lstm or gru"))
    return found


def _typed(value, kind: type) -> bool:
    if kind is str:
        return isinstance(value, str)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        return False
    return kind is float or value == int(value)


def with_input(args: dict, given: str) -> dict:
    """The arguments with the student's input put where a file wrote {input} (cut to MAX_INPUT characters)."""
    given = " ".join(str(given).split())[:MAX_INPUT]
    return {k: v.replace(INPUT, given) if isinstance(v, str) else v for k, v in args.items()}


def uses_input(args: dict) -> bool:
    return any(isinstance(v, str) and INPUT in v for v in args.values())


def compute(name: str, args: dict) -> tuple[str, str]:
    """The answer and why, computed by the tool now (the same arguments twice: computed once, the models do not
    change while the app runs). A ToolError with a clear message when it cannot be."""
    found = problems(name, args)
    if found:
        raise ToolError("; ".join(f"{field}: {message}" for field, message in found))
    return _compute(name, tuple(sorted(args.items())))


@lru_cache(maxsize=512)
def _compute(name: str, frozen: tuple) -> tuple[str, str]:
    tool = TOOLS[name]
    args = {k: tool.params[k](v) for k, v in frozen}                  # 3 for a float argument is 3.0
    try:
        return tool.run(**args)
    except ToolError:
        raise
    except (ValueError, KeyError, IndexError, RuntimeError) as err:   # a model's own refusal, said plainly
        raise ToolError(f"{name} could not compute an answer: {str(err)[:200]}") from None
