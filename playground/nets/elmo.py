"""ELMo's bidirectional language model (biLM) and the ELMo mix of its layers.

Reference
    Peters et al. 2018, "Deep contextualized word representations" (NAACL), §3.1 (the biLM), §3.2 (ELMo, eq. 1),
    §3.4 (the pre-trained model: L = 2 biLSTM layers, a residual connection from the first layer to the second,
    token representation and softmax shared between the two directions).

§3.1. A forward LM reads t_1 .. t_N and models p(t_k | t_1 .. t_{k-1}); a backward LM reads the same tokens from
the end and models p(t_k | t_{k+1} .. t_N). Both start from one context-independent token representation x_k^LM and
run L LSTM layers of their own, giving →h_{k,j} and ←h_{k,j} (j = 1 .. L); the top layer →h_{k,L} (←h_{k,L}) predicts
the next (previous) token through one softmax shared by the two directions. Training maximises

    Σ_k [ log p(t_k | t_1 .. t_{k-1}; Θ_x, →Θ_LSTM, Θ_s) + log p(t_k | t_{k+1} .. t_N; Θ_x, ←Θ_LSTM, Θ_s) ].

§3.2. The biLM's L + 1 layer representations of token k are h_{k,0} = [x_k; x_k] and h_{k,j} = [→h_{k,j}; ←h_{k,j}];
ELMo collapses them into one vector per token (eq. 1):

    ELMo_k = γ Σ_{j=0}^{L} s_j h_{k,j},     s = softmax(w)   (the paper's s^task: softmax-normalised weights)

Departures from the paper, each said again on its line:
  - the token layer x_k is a word embedding over a word-level vocabulary, not the paper's character CNN
    (2048 character n-gram filters, two highway layers, a 512-wide projection): the playground's task allows word
    input, and a character CNN would take most of our CPU budget;
  - the softmax is tied to that word embedding (Press & Wolf 2017; Inan et al. 2017), to keep the checkpoint small;
    the paper shares the softmax between the directions (so do we) but does not tie it to the input;
  - the LSTMs have no projection layer (the paper: 4096 units projected to 512) and no dropout (a few CPU minutes
    see less than one pass over the corpus); one width `n_embd` serves x_k and every state, so the residual adds,
    the tie fits and h_{k,0} = [x_k; x_k] is as wide as the other layers, as eq. 1 needs.

The LSTM is the project's own cell (nets/recurrent.py's LSTMCell, unrolled by RecurrentEncoder: parity with
torch.nn.LSTM), one single-layer encoder per (layer, direction), since the residual sits between the layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from playground.nets.recurrent import RecurrentEncoder, _uniform_

# ---------------------------------------------------------------------------------------------
# ELMo (eq. 1): a task's weighted sum of the biLM's layers


def mix(layers: torch.Tensor, s: torch.Tensor, gamma: float | torch.Tensor) -> torch.Tensor:
    """Eq. 1: ELMo_k = γ Σ_j softmax(s)_j h_{k,j}. layers (L+1, ..., 2C), s (L+1,) unnormalised weights ->
    (..., 2C). s = 0 and γ = 1 give the plain average of the layers (the paper's simplest variant)."""
    s = torch.as_tensor(s, dtype=layers.dtype)
    assert s.shape == (layers.shape[0],), f"s has {tuple(s.shape)} weights for {layers.shape[0]} layers"
    weights = torch.softmax(s, dim=0)                                     # s_j, summing to 1
    return gamma * torch.einsum("j,j...->...", weights, layers)           # γ Σ_j s_j h_{k,j}


# ---------------------------------------------------------------------------------------------
# Config and the biLM


@dataclass
class ELMoConfig:
    vocab_size: int = 10_001      # set from the trained word vocabulary ([UNK] included) by the trainer
    n_embd: int = 192             # C: width of x_k and of every LSTM state (equal: residual, tied softmax, eq. 1)
    n_layer: int = 2              # L, LSTM layers per direction (the paper's L = 2)
    residual: bool = True         # →h_{k,2} += →h_{k,1} (the paper's residual connection from layer 1 to layer 2)
    forget_bias: float = 1.0      # initial b_f, so f_t ~ 0.73 and the gradient flows from the start
    init_scale: float = 0.1       # x_k ~ U(±init_scale): the tied softmax starts near uniform (loss ≈ ln V)

    def __post_init__(self):
        assert self.vocab_size >= 2, f"vocab_size={self.vocab_size}: need [UNK] and at least one word"
        assert self.n_embd > 0, f"n_embd={self.n_embd} must be positive"
        assert self.n_layer >= 1, f"n_layer={self.n_layer} must be at least 1"


class ELMo(nn.Module):
    """The biLM of §3.1 over word ids: x_k = E[t_k]; →h_{k,j} and ←h_{k,j} from L LSTM layers per direction, with
    the residual connection; p(next | →h_{k,L}) and p(previous | ←h_{k,L}) through one shared softmax.

    Parameters: wte (V, C) the token layer (and, tied, the softmax's weights); fwd.l / bwd.l, one single-layer
    RecurrentEncoder per layer l and direction (torch.nn.LSTM's layout: weight_ih (4C, C) ...); b_s (V,) the softmax
    bias.
    """

    def __init__(self, config: ELMoConfig):
        super().__init__()
        self.config = config
        C, L = config.n_embd, config.n_layer
        self.wte = nn.Embedding(config.vocab_size, C)   # Θ_x: a word embedding, not the paper's character CNN
        # →Θ_LSTM and ←Θ_LSTM: separate weights per direction; one encoder per layer so the residual fits between
        self.fwd = nn.ModuleList(RecurrentEncoder("lstm", C, C) for _ in range(L))
        self.bwd = nn.ModuleList(RecurrentEncoder("lstm", C, C) for _ in range(L))
        self.b_s = nn.Parameter(torch.zeros(config.vocab_size))  # Θ_s = (wte tied, b_s), shared by both directions
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """x_k ~ U(±init_scale); every LSTM parameter ~ U(±1/√C) (torch.nn.LSTM's init), then the forget bias;
        b_s = 0. Drawn from `generator` alone when one is given (never the process-wide generator)."""
        c = self.config
        with torch.no_grad():
            nn.init.uniform_(self.wte.weight, -c.init_scale, c.init_scale, generator=generator)
            for enc in [*self.fwd, *self.bwd]:
                cell = enc.cells[0]
                _uniform_(cell, c.n_embd, generator)
                H = c.n_embd   # the forget rows: block 1 of (i, f, g, o); b_if + b_hf = forget_bias
                cell.bias_ih[H:2 * H].fill_(c.forget_bias / 2)
                cell.bias_hh[H:2 * H].fill_(c.forget_bias / 2)
            self.b_s.zero_()

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    # -- one direction's stack of LSTM layers

    def _stack(self, encoders: nn.ModuleList, x: torch.Tensor, internals: list | None) -> list[torch.Tensor]:
        """x (B, T, C), already in the direction's reading order -> the L layer outputs, each (B, T, C).
        Layer j > 1 adds its input (the residual connection); the internals get the raw LSTM h_t, c_t, gates."""
        outs, h = [], x
        for j, enc in enumerate(encoders):
            if internals is not None:
                y, _, inner = enc(h, return_internals=True)                 # (B, T, C)
                internals.append(inner["layers"][0])
            else:
                y, _ = enc(h)                                               # torch's fused kernel, same numbers
            h = y + h if (self.config.residual and j > 0) else y            # residual from layer 1 on (§3.4)
            outs.append(h)
        return outs

    def _backward(self, x: torch.Tensor, internals: list | None) -> list[torch.Tensor]:
        """The backward LM: the same stack run over the tokens from the end (x flipped in time), its outputs flipped
        back, so index k is token k and ←h_{k,j} has read t_k .. t_N."""
        inner = [] if internals is not None else None
        outs = [h.flip(1) for h in self._stack(self.bwd, x.flip(1), inner)]   # (B, T, C) in the tokens' order
        if internals is not None:
            for layer in inner:   # the encoder's lists run in reading order; put them in the tokens' order too
                internals.append({"h": layer["h"][::-1], "c": layer["c"][::-1],
                                  "gates": {k: g.flip(1) for k, g in layer["gates"].items()}})
        return outs

    def _softmax_logits(self, h: torch.Tensor) -> torch.Tensor:
        """The shared softmax: h (B, T, C) -> logits (B, T, V) = h E^T + b_s (weights tied to the token layer, to
        keep the checkpoint small; the paper shares the softmax between directions but does not tie it)."""
        return F.linear(h, self.wte.weight, self.b_s)

    def forward(self, idx, targets=None, return_internals: bool = False):
        """idx (B, T) word ids -> (logits_fwd, logits_bwd), loss [, internals].

        Without targets both LMs read idx: logits_fwd[:, k] is p(t_{k+1} | t_1 .. t_k) and logits_bwd[:, k] is
        p(t_{k-1} | t_k .. t_T). With targets (the next tokens, targets[:, k] = idx[:, k+1], as for every LM
        here) the window holds T + 1 tokens w_0 .. w_T: the forward LM reads w_0 .. w_{T-1} (idx) and predicts
        w_1 .. w_T (targets); the backward LM reads w_T .. w_1 (targets, from the end) and predicts
        w_{T-1} .. w_0 (idx), so logits_bwd[:, k] scores idx[:, k]. Each direction predicts T tokens, every token
        of the window once. loss = (NLL_fwd + NLL_bwd) / 2, each the mean over its T predictions.

        internals (return_internals) describe idx read both ways: "layers", index 2(j-1) + d for layer j and
        direction d (0 forward, 1 backward, as RecurrentEncoder orders layer x direction), each {"h", "c",
        "gates"} with time in the tokens' order for both directions; "hidden", the stream after each layer as for
        every family: L + 1 tensors (B, T, 2C), the h_{k,j} of §3.2 (its width is 2C = 2 n_embd, the forward and
        the backward state side by side; layer 0 is [x_k; x_k]); "loss_fwd", "loss_bwd" when targets are given.
        """
        B, T = idx.shape
        x = self.wte(idx)                                                   # x_k (B, T, C)
        inner = [] if return_internals else None
        fwd = self._stack(self.fwd, x, inner)                               # →h_{k,j}, j = 1..L
        x_b = x if targets is None else self.wte(targets)                   # the backward LM reads w_T .. w_1
        inner_b = [] if return_internals and targets is None else None
        bwd = self._backward(x_b, inner_b)                                  # ←h_{k,j}
        logits_f = self._softmax_logits(fwd[-1])                            # (B, T, V): the next token
        logits_b = self._softmax_logits(bwd[-1])                            # (B, T, V): the previous token
        loss = loss_f = loss_b = None
        if targets is not None:
            loss_f = F.cross_entropy(logits_f.flatten(0, 1), targets.flatten())   # -log p(w_{k+1} | w_0..w_k)
            loss_b = F.cross_entropy(logits_b.flatten(0, 1), idx.flatten())       # -log p(w_k | w_{k+1}..w_T)
            loss = (loss_f + loss_b) / 2                                    # the two log-likelihoods, jointly
        if not return_internals:
            return (logits_f, logits_b), loss
        if targets is not None:   # the internals describe idx read both ways: run the backward LM over idx too
            inner_b = []
            bwd = self._backward(x, inner_b)
        per_layer = [layer for pair in zip(inner, inner_b) for layer in pair]   # (j=1 fwd, j=1 bwd, j=2 fwd, ...)
        internals = {"layers": per_layer, "hidden": self._hidden(x, fwd, bwd)}
        if targets is not None:
            internals |= {"loss_fwd": loss_f, "loss_bwd": loss_b}
        return (logits_f, logits_b), loss, internals

    @staticmethod
    def _hidden(x, fwd, bwd) -> list[torch.Tensor]:
        """§3.2: h_{k,0} = [x_k; x_k], h_{k,j} = [→h_{k,j}; ←h_{k,j}] (after the residual for j ≥ 2, as the next layer
        and the softmax read it) -> L + 1 tensors (B, T, 2C)."""
        return [torch.cat([x, x], -1)] + [torch.cat([f, b], -1) for f, b in zip(fwd, bwd)]
