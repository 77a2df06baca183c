"""Decoding the encoder-decoders of seq2seq.py: greedy and beam search over their step() contract
(`encode(src) -> memory; start(memory) -> state; step(y_prev, state, memory) -> (logits, state, alpha)`), and the
log-probability of a whole target under teacher forcing. The same for all five variants; the causal LMs' decoding
is analysis/sampling.py's.

References
    Sutskever, Vinyals & Le 2014, "Sequence to sequence learning with neural networks" (left-to-right beam search).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from playground.nets.seq2seq import TransformerSeq2Seq, uniform_attention


def _reorder(state, index: torch.Tensor):
    """Keep the batch rows `index` of a decoder state (a tensor or a tuple of tensors)."""
    return tuple(s[index] for s in state) if isinstance(state, tuple) else state[index]


def _output_limit(model, max_len: int) -> int:
    """The Transformer has config.max_len positions for the target too; the RNNs have no limit."""
    return min(max_len, model.config.max_len) if isinstance(model, TransformerSeq2Seq) else max_len


@torch.no_grad()
def greedy(model, src: torch.Tensor, max_len: int, uniform: bool = False) -> tuple[torch.Tensor, list]:
    """y_i = argmax p(y | y_<i, x), until every row has emitted </s> or after max_len tokens.
    Returns ids (B, n) (</s> included, then padded with </s>) and alpha per step: a list of (B, T_src) (or None).
    `uniform`: a recurrent attention model's weights replaced by 1/T (seq2seq.uniform_attention), a knockout."""
    bos, eos = model.config.bos_id, model.config.eos_id
    max_len = _output_limit(model, max_len)
    memory = model.encode(src)
    if uniform:
        memory = uniform_attention(memory)
    state = model.start(memory)
    y = torch.full((src.size(0),), bos, dtype=torch.long, device=src.device)
    out, alphas = [], []
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        logits, state, alpha = model.step(y, state, memory)
        y = logits.argmax(-1).masked_fill(done, eos)
        out.append(y)
        alphas.append(alpha)
        done |= y == eos
        if bool(done.all()):
            break
    return torch.stack(out, dim=1), alphas


@torch.no_grad()
def beam_search(step, start_state, bos: int, eos: int, beam_size: int, max_len: int) -> list[tuple[list[int], float]]:
    """Keep the `beam_size` most probable prefixes by log p(y_<=i | x) = sum_t log p(y_t | y_<t, x); a prefix
    that emits </s> is finished. Stops when `beam_size` prefixes are finished (or after max_len steps).

    step(y_prev (K,), state, index (K,)) -> (log-probs (K, V), state): the model's step on K live prefixes
    (index: which start row each one continues, for the encoder memory). One source at a time.
    Returns the finished sequences (</s> included), best first, with their log-probabilities; no length
    normalisation (every score is a plain log-probability, so comparisons with greedy are fair).
    """
    prefixes, scores = [[]], torch.zeros(1)
    state, y = start_state, torch.tensor([bos])
    finished: list[tuple[list[int], float]] = []
    for _ in range(max_len):
        logp, state = step(y, state)                               # (K, V)
        V = logp.size(1)
        candidates = (scores[:, None] + logp).view(-1)             # (K * V,)
        top, flat = candidates.topk(min(len(candidates), 2 * beam_size))
        keep_rows, keep_tokens, keep_scores = [], [], []
        for score, index in zip(top.tolist(), flat.tolist()):
            row, token = divmod(index, V)
            if token == eos:
                finished.append((prefixes[row] + [token], score))
            else:
                keep_rows.append(row)
                keep_tokens.append(token)
                keep_scores.append(score)
            if len(keep_rows) == beam_size:
                break
        finished.sort(key=lambda f: -f[1])
        # stop when no live prefix can beat the beam_size-th finished one (log-probabilities only fall)
        if not keep_rows or (len(finished) >= beam_size and finished[beam_size - 1][1] >= keep_scores[0]):
            break
        index = torch.tensor(keep_rows)
        prefixes = [prefixes[r] + [t] for r, t in zip(keep_rows, keep_tokens)]
        scores, y = torch.tensor(keep_scores), torch.tensor(keep_tokens)
        state = _reorder(state, index)
    if not finished:  # max_len reached with nothing finished: the live prefixes are the answer
        finished = [(p, s) for p, s in zip(prefixes, scores.tolist())]
    return sorted(finished, key=lambda f: -f[1])[:beam_size]


@torch.no_grad()
def beam_decode(model, src: torch.Tensor, beam_size: int, max_len: int) -> list[tuple[list[int], float]]:
    """Beam search with a seq2seq model on one source src (1, T)."""
    assert src.size(0) == 1, "beam search decodes one source at a time"
    memory = model.encode(src)

    def expand(mem, k: int):
        if isinstance(mem, dict):
            return {key: (v.expand(k, *v.shape[1:]) if v is not None else None) for key, v in mem.items()}
        return mem.expand(k, *mem.shape[1:])

    def step(y, state):
        logits, state, _ = model.step(y, state, expand(memory, y.size(0)))
        return F.log_softmax(logits.float(), dim=-1), state

    return beam_search(step, model.start(memory), model.config.bos_id, model.config.eos_id, beam_size,
                       _output_limit(model, max_len))


@torch.no_grad()
def sequence_logprob(model, src: torch.Tensor, ids: list[int]) -> float:
    """log p(y | x) of a whole target sequence y (</s> included) under teacher forcing, for one source."""
    bos = model.config.bos_id
    tgt_in = torch.tensor([[bos] + ids[:-1]])
    logits, _ = model(src, tgt_in)
    logp = F.log_softmax(logits[0].float(), dim=-1)               # (T, V)
    return float(logp[torch.arange(len(ids)), torch.tensor(ids)].sum())
