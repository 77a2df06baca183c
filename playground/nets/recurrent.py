"""Recurrent networks written from their equations: the Elman RNN, the LSTM (with the peephole and
coupled-gate variants) and the GRU; stacked and bidirectional encoders; a character-level language model.

References
    Elman 1990, "Finding structure in time".
    Hochreiter & Schmidhuber 1997, "Long short-term memory"; the forget gate: Gers, Schmidhuber & Cummins 2000;
    peephole connections: Gers & Schmidhuber 2000; coupled input-forget gates: Greff et al. 2017 ("CIFG").
    Cho et al. 2014, "Learning phrase representations using RNN encoder-decoder" (the GRU).

Parameter layout: exactly that of torch.nn.RNN / LSTM / GRU (the same names per cell, the same gate order
in the stacked matrices, two bias vectors), so weights move both ways and tests prove identical outputs and
gradients. Every cell has one interface, `cell(x_t, state) -> (h_t, state)`, so RNN vs LSTM vs GRU is a
fair comparison by construction.

GRU convention. The lectures disagree: one writes h_t = (1 - z_t) * h_{t-1} + z_t * h~_t (z = "how much new"),
another h_t = z_t * h_{t-1} + (1 - z_t) * h~_t (z = "how much to keep"). We use the second, which is Cho et al.
2014's own equation and what torch.nn.GRU computes, so that parity with the reference holds weight for weight.
Under it z_t -> 1 copies the state forward, and dh_t/dh_{t-1} has the direct term diag(z_t).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from playground.nets.meta import embedding

ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu, "sigmoid": torch.sigmoid}


def _uniform_(module: nn.Module, hidden_size: int, generator: torch.Generator | None = None) -> None:
    """torch.nn's recurrent init: every parameter ~ U(-1/sqrt(H), 1/sqrt(H))."""
    k = 1.0 / math.sqrt(hidden_size)
    for p in module.parameters():
        nn.init.uniform_(p, -k, k, generator=generator)


# ---------------------------------------------------------------------------------------------
# Cells: one time step. x_t (B, I), state -> h_t (B, H), new state, and (when asked) the internals.


class ElmanCell(nn.Module):
    """Elman 1990:  a_t = W_ih x_t + b_ih + W_hh h_{t-1} + b_hh,   h_t = phi(a_t).

    torch.nn.RNN has two bias vectors (b_ih, b_hh) where the paper has one; their sum acts as one bias.
    phi is tanh or ReLU as in torch.nn.RNN, or the logistic sigmoid (ours only, for the gradient-flow tab).
    """

    gate_names: tuple[str, ...] = ()
    n_gates = 1

    def __init__(self, input_size: int, hidden_size: int, nonlinearity: str = "tanh"):
        super().__init__()
        assert nonlinearity in ACTIVATIONS, f"nonlinearity {nonlinearity!r} is not one of {', '.join(ACTIVATIONS)}"
        self.input_size, self.hidden_size, self.nonlinearity = input_size, hidden_size, nonlinearity
        self.weight_ih = nn.Parameter(torch.empty(hidden_size, input_size))   # W_ih (H, I)
        self.weight_hh = nn.Parameter(torch.empty(hidden_size, hidden_size))  # W_hh (H, H)
        self.bias_ih = nn.Parameter(torch.empty(hidden_size))
        self.bias_hh = nn.Parameter(torch.empty(hidden_size))
        _uniform_(self, hidden_size)

    def init_state(self, B: int, like: torch.Tensor) -> torch.Tensor:
        return like.new_zeros(B, self.hidden_size)

    def forward(self, x_t, state, return_internals: bool = False):
        h = state                                                                        # h_{t-1} (B, H)
        a_t = F.linear(x_t, self.weight_ih, self.bias_ih) + F.linear(h, self.weight_hh, self.bias_hh)
        h_t = ACTIVATIONS[self.nonlinearity](a_t)
        if return_internals:
            return h_t, h_t, {"a": a_t}  # a_t gives phi'(a_t), the diagonal of dh_t/dh_{t-1} = diag(phi'(a_t)) W_hh
        return h_t, h_t


class LSTMCell(nn.Module):
    """Hochreiter & Schmidhuber 1997, with the forget gate of Gers et al. 2000 (what torch.nn.LSTM computes):

        i_t = sigma(W_ii x_t + b_ii + W_hi h_{t-1} + b_hi)        input gate
        f_t = sigma(W_if x_t + b_if + W_hf h_{t-1} + b_hf)        forget gate
        g_t = tanh (W_ig x_t + b_ig + W_hg h_{t-1} + b_hg)        candidate cell  (the lectures' C~_t)
        o_t = sigma(W_io x_t + b_io + W_ho h_{t-1} + b_ho)        output gate
        c_t = f_t * c_{t-1} + i_t * g_t                           additive: dc_t/dc_{t-1} = diag(f_t)
        h_t = o_t * tanh(c_t)

    Gates are stacked in torch.nn.LSTM's order (i, f, g, o): weight_ih (4H, I), weight_hh (4H, H).
    Options (both off in torch.nn.LSTM, so parity is only for the plain cell):
      peephole: the gates also see the cell (Gers & Schmidhuber 2000): + w_ci * c_{t-1} in i_t, + w_cf * c_{t-1}
                in f_t, + w_co * c_t in o_t. Diagonal (one weight per unit) as in that paper, where the lecture
                slide writes a full matrix W . [C, h, x].
      coupled:  no input gate; i_t = 1 - f_t ("forget only what you replace"); the stacks are (f, g, o), 3H rows.
    """

    def __init__(self, input_size: int, hidden_size: int, peephole: bool = False, coupled: bool = False):
        super().__init__()
        self.input_size, self.hidden_size, self.peephole, self.coupled = input_size, hidden_size, peephole, coupled
        self.gate_names = ("f", "g", "o") if coupled else ("i", "f", "g", "o")
        self.n_gates = len(self.gate_names)
        G = self.n_gates * hidden_size
        self.weight_ih = nn.Parameter(torch.empty(G, input_size))   # (4H, I): rows i | f | g | o
        self.weight_hh = nn.Parameter(torch.empty(G, hidden_size))  # (4H, H)
        self.bias_ih = nn.Parameter(torch.empty(G))
        self.bias_hh = nn.Parameter(torch.empty(G))
        if peephole:
            if not coupled:
                self.weight_ci = nn.Parameter(torch.empty(hidden_size))  # w_ci: c_{t-1} -> i_t
            self.weight_cf = nn.Parameter(torch.empty(hidden_size))      # w_cf: c_{t-1} -> f_t
            self.weight_co = nn.Parameter(torch.empty(hidden_size))      # w_co: c_t -> o_t
        _uniform_(self, hidden_size)

    def init_state(self, B: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return like.new_zeros(B, self.hidden_size), like.new_zeros(B, self.hidden_size)

    def forward(self, x_t, state, return_internals: bool = False, clamp: dict[str, float] | None = None):
        """`clamp` holds gates at fixed values for this call (a knockout: {"f": 0.0} forgets everything at once,
        {"f": 1.0} never forgets), in place of what the weights compute; the weights are untouched."""
        h, c = state                                                                    # h_{t-1}, c_{t-1} (B, H)
        pre = F.linear(x_t, self.weight_ih, self.bias_ih) + F.linear(h, self.weight_hh, self.bias_hh)  # (B, 4H)
        parts = dict(zip(self.gate_names, pre.chunk(self.n_gates, dim=1)))
        if self.peephole:
            parts["f"] = parts["f"] + self.weight_cf * c
        f_t = torch.sigmoid(parts["f"]) if not clamp or "f" not in clamp else torch.full_like(c, clamp["f"])
        if self.coupled:
            i_t = 1 - f_t                                   # coupled gates: input = 1 - forget
        else:
            i_t = torch.sigmoid(parts["i"] + self.weight_ci * c if self.peephole else parts["i"])
        g_t = torch.tanh(parts["g"])
        if clamp and "i" in clamp:
            i_t = torch.full_like(c, clamp["i"])
        c_t = f_t * c + i_t * g_t                           # the constant error carousel when f_t = 1
        o_t = torch.sigmoid(parts["o"] + self.weight_co * c_t if self.peephole else parts["o"])  # peephole sees c_t
        if clamp and "o" in clamp:
            o_t = torch.full_like(c, clamp["o"])
        h_t = o_t * torch.tanh(c_t)
        if return_internals:
            return h_t, (h_t, c_t), {"i": i_t, "f": f_t, "g": g_t, "o": o_t}   # c_t is in the state
        return h_t, (h_t, c_t)


class GRUCell(nn.Module):
    """Cho et al. 2014, as torch.nn.GRU computes it:

        r_t = sigma(W_ir x_t + b_ir + W_hr h_{t-1} + b_hr)           reset gate
        z_t = sigma(W_iz x_t + b_iz + W_hz h_{t-1} + b_hz)           update gate
        n_t = tanh (W_in x_t + b_in + r_t * (W_hn h_{t-1} + b_hn))   candidate state (the lectures' h~_t)
        h_t = (1 - z_t) * n_t + z_t * h_{t-1}                        z_t -> 1 keeps the old state

    Stacked in torch.nn.GRU's order (r, z, n): weight_ih (3H, I), weight_hh (3H, H). Two departures from the
    paper, both torch's: the reset gate multiplies W_hn h_{t-1} + b_hn rather than h_{t-1} before the matrix
    (Cho et al.: W (r_t * h_{t-1})), and there are two biases. See the module docstring for the z_t convention.
    """

    gate_names = ("r", "z", "n")
    n_gates = 3

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        self.weight_ih = nn.Parameter(torch.empty(3 * hidden_size, input_size))   # (3H, I): rows r | z | n
        self.weight_hh = nn.Parameter(torch.empty(3 * hidden_size, hidden_size))  # (3H, H)
        self.bias_ih = nn.Parameter(torch.empty(3 * hidden_size))
        self.bias_hh = nn.Parameter(torch.empty(3 * hidden_size))
        _uniform_(self, hidden_size)

    def init_state(self, B: int, like: torch.Tensor) -> torch.Tensor:
        return like.new_zeros(B, self.hidden_size)

    def forward(self, x_t, state, return_internals: bool = False, clamp: dict[str, float] | None = None):
        """`clamp` holds gates at fixed values for this call ({"z": 1.0}: h_t = h_{t-1}, the state is copied forward
        and nothing new enters; {"z": 0.0}: h_t = n_t, no memory but through the reset gate's path)."""
        h = state                                                                        # h_{t-1} (B, H)
        xr, xz, xn = F.linear(x_t, self.weight_ih, self.bias_ih).chunk(3, dim=1)         # each (B, H)
        hr, hz, hn = F.linear(h, self.weight_hh, self.bias_hh).chunk(3, dim=1)
        r_t = torch.sigmoid(xr + hr) if not clamp or "r" not in clamp else torch.full_like(h, clamp["r"])
        z_t = torch.sigmoid(xz + hz) if not clamp or "z" not in clamp else torch.full_like(h, clamp["z"])
        n_t = torch.tanh(xn + r_t * hn)        # reset applied after W_hn (torch.nn.GRU), not before (Cho et al.)
        h_t = (1 - z_t) * n_t + z_t * h
        if return_internals:
            return h_t, h_t, {"r": r_t, "z": z_t, "n": n_t}
        return h_t, h_t


CELLS = {"rnn": ElmanCell, "lstm": LSTMCell, "gru": GRUCell}
CLAMPABLE = {"rnn": (), "lstm": ("i", "f", "o"), "gru": ("r", "z")}  # the gates a knockout may hold (`clamp`)
# The knockouts the app offers, by name: (cell, gate, value). Each applies to its cell only (the others run as trained).
KNOCKOUTS = {"forget-0": ("lstm", "f", 0.0), "forget-1": ("lstm", "f", 1.0),
             "update-0": ("gru", "z", 0.0), "update-1": ("gru", "z", 1.0)}


def knockout(name: str, cell: str) -> dict[str, float] | None:
    """The `clamp` of a named knockout for a cell (None: "none", or a knockout of another cell's gate)."""
    spec = KNOCKOUTS.get(name)
    return {spec[1]: spec[2]} if spec and spec[0] == cell else None
TORCH_CLASSES = {"rnn": "RNN", "lstm": "LSTM", "gru": "GRU"}  # the torch.nn module with the same layout


def make_cell(kind: str, input_size: int, hidden_size: int, nonlinearity: str = "tanh", peephole: bool = False,
              coupled: bool = False) -> nn.Module:
    assert kind in CELLS, f"cell {kind!r} is not one of {', '.join(CELLS)}"
    if kind == "rnn":
        return ElmanCell(input_size, hidden_size, nonlinearity)
    if kind == "lstm":
        return LSTMCell(input_size, hidden_size, peephole=peephole, coupled=coupled)
    return GRUCell(input_size, hidden_size)


# ---------------------------------------------------------------------------------------------
# Encoder: cells unrolled over time, stacked in layers, optionally in both directions


class RecurrentEncoder(nn.Module):
    """`num_layers` layers of `D` = 1 or 2 directions; layer l > 0 reads the concatenated outputs of layer l-1.

    Input x (B, T, I); output (B, T, D*H). The state follows torch.nn: h (L*D, B, H), and for the LSTM a pair
    (h, c); index l*D + d is layer l, direction d (1 = reversed). `cells[l*D + d]` holds torch's
    weight_ih_l{l}[_reverse] etc. under the names weight_ih, ...; `torch_state_dict()` / `load_torch_state_dict()`
    translate.
    """

    def __init__(self, cell: str, input_size: int, hidden_size: int, num_layers: int = 1, bidirectional: bool = False,
                 nonlinearity: str = "tanh", peephole: bool = False, coupled: bool = False):
        super().__init__()
        assert num_layers >= 1, f"num_layers={num_layers} must be at least 1"
        self.kind, self.hidden_size, self.num_layers = cell, hidden_size, num_layers
        self.D = 2 if bidirectional else 1
        self.cells = nn.ModuleList(
            make_cell(cell, input_size if l == 0 else self.D * hidden_size, hidden_size, nonlinearity, peephole,
                      coupled)
            for l in range(num_layers) for _ in range(self.D)
        )
        # torch's fused kernels compute exactly the plain cells; used for speed when no one looks inside
        self.fusable = not peephole and not coupled and nonlinearity in ("tanh", "relu")
        self.nonlinearity = nonlinearity

    # -- torch.nn names <-> ours

    def _torch_names(self):
        for l in range(self.num_layers):
            for d in range(self.D):
                suffix = f"_l{l}" + ("_reverse" if d else "")
                for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    yield f"cells.{l * self.D + d}.{name}", name + suffix

    def torch_state_dict(self) -> dict[str, torch.Tensor]:
        ours = self.state_dict()
        return {theirs: ours[mine] for mine, theirs in self._torch_names()}

    def load_torch_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        assert self.fusable, "peephole or coupled LSTMs have no torch.nn counterpart"
        self.load_state_dict({mine: state[theirs] for mine, theirs in self._torch_names()})

    # -- state in torch.nn's format

    def init_state(self, B: int, like: torch.Tensor):
        h = like.new_zeros(self.num_layers * self.D, B, self.hidden_size)   # (L*D, B, H)
        return (h, h.clone()) if self.kind == "lstm" else h

    def _cell_state(self, state, k: int):
        return (state[0][k], state[1][k]) if self.kind == "lstm" else state[k]

    def _stack_states(self, states: list):
        if self.kind == "lstm":
            return torch.stack([s[0] for s in states]), torch.stack([s[1] for s in states])
        return torch.stack(states)

    def forward(self, x, state=None, return_internals: bool = False, fused: bool | None = None,
                clamp: dict[str, float] | None = None):
        """x (B, T, I) -> out (B, T, D*H), state [, internals]. `clamp` ({gate: value}, the gates of CLAMPABLE)
        holds those gates of every cell at that value for this call (a knockout; cell by cell, not fused).

        internals (only with return_internals) is {"layers": one dict per (layer, direction), index l*D + d},
        each with the same keys for every cell: "h", the list of the T tensors h_t (B, H) themselves, nodes of
        the autograd graph, so their gradients can be read with retain_grad(); "c", likewise the LSTM's c_t
        (None for the other cells); "gates", each gate by its name stacked as (B, T, H) (the Elman cell has
        none and gives its pre-activation "a" instead). Time runs forward in these lists for both directions.
        """
        B, T, _ = x.shape
        if state is None:
            state = self.init_state(B, x)
        if clamp:
            assert set(clamp) <= set(CLAMPABLE[self.kind]), \
                f"a {self.kind} cell can clamp {', '.join(CLAMPABLE[self.kind]) or 'no gate'}, not {', '.join(clamp)}"
        if fused is None:
            fused = self.fusable and not return_internals and not clamp
        if fused:
            assert self.fusable and not return_internals and not clamp, \
                "the fused kernel has no internals, no cell variants and no clamped gates"
            return self._fused(x, state)
        knock = {"clamp": clamp} if clamp else {}  # only the cells with gates take the argument

        layer_in, finals, internals = x, [], []
        for l in range(self.num_layers):
            outs = []
            for d in range(self.D):
                k = l * self.D + d
                cell, s = self.cells[k], self._cell_state(state, k)
                steps = range(T - 1, -1, -1) if d else range(T)   # the reverse direction reads x_T ... x_1
                hs, cs, gates = [None] * T, [None] * T, [None] * T
                for t in steps:
                    if return_internals:
                        h_t, s, g = cell(layer_in[:, t], s, return_internals=True, **knock)
                        gates[t] = g
                        if self.kind == "lstm":
                            cs[t] = s[1]
                    else:
                        h_t, s = cell(layer_in[:, t], s, **knock)
                    hs[t] = h_t
                finals.append(s)
                outs.append(torch.stack(hs, dim=1))                 # (B, T, H)
                if return_internals:
                    internals.append({"h": hs, "c": cs if self.kind == "lstm" else None,
                                      "gates": {name: torch.stack([g[name] for g in gates], dim=1)  # (B, T, H)
                                                for name in gates[0]}})
            layer_in = torch.cat(outs, dim=-1) if self.D == 2 else outs[0]        # (B, T, D*H)
        if return_internals:
            return layer_in, self._stack_states(finals), {"layers": internals}
        return layer_in, self._stack_states(finals)

    def _fused(self, x, state):
        """torch.nn's kernel over our parameters (same layout): identical results, several times faster."""
        weights = [p for cell in self.cells for p in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)]
        # bias, L, dropout, train, bidir, batch_first
        args = (weights, True, self.num_layers, 0.0, self.training, self.D == 2, True)
        if self.kind == "lstm":
            out, h, c = torch.lstm(x, state, *args)
            return out, (h, c)
        fn = torch.gru if self.kind == "gru" else (torch.rnn_tanh if self.nonlinearity == "tanh" else torch.rnn_relu)
        out, h = fn(x, state, *args)
        return out, h


# ---------------------------------------------------------------------------------------------
# Config and the character-level language model


@dataclass
class RecurrentConfig:
    cell: str = "lstm"            # rnn (Elman) | lstm | gru
    vocab_size: int = 65          # set from the data's tokenizer by the trainer
    n_embd: int = 64              # m, the input size of the first layer: a learned embedding, not one-hot
    hidden_size: int = 128        # n, the state size; pick per cell for comparable parameter counts
    num_layers: int = 1           # stacked layers
    nonlinearity: str = "tanh"    # Elman cell only: tanh | relu | sigmoid (sigmoid has no fused kernel)
    peephole: bool = False        # LSTM only: gates see the cell (Gers & Schmidhuber 2000)
    coupled: bool = False         # LSTM only: i_t = 1 - f_t
    forget_bias: float = 1.0      # LSTM only: initial b_f, so f_t ~ 0.73 and the gradient flows from the start

    def __post_init__(self):
        assert self.cell in CELLS, f"cell={self.cell!r} must be one of {', '.join(CELLS)}"
        assert self.nonlinearity in ACTIVATIONS, f"nonlinearity={self.nonlinearity!r} must be one of " \
                                                 f"{', '.join(ACTIVATIONS)}"
        assert self.cell == "lstm" or not (self.peephole or self.coupled), "peephole and coupled are LSTM options"
        assert self.n_embd > 0 and self.hidden_size > 0 and self.num_layers > 0, "sizes must be positive"


class RecurrentLM(nn.Module):
    """Character-level language model: embedding -> recurrent encoder (causal, one direction) -> linear head.

        x_t = E[idx_t],   h_t = cell(x_t, h_{t-1}),   logits_t = W_hy h_t + b_y,   loss = CE(logits_t, idx_{t+1})
    """

    def __init__(self, config: RecurrentConfig):
        super().__init__()
        self.config = config
        self.wte = embedding(config.vocab_size, config.n_embd)
        self.encoder = RecurrentEncoder(config.cell, config.n_embd, config.hidden_size, config.num_layers,
                                        bidirectional=False,  # a language model must not read the future
                                        nonlinearity=config.nonlinearity, peephole=config.peephole,
                                        coupled=config.coupled)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size)
        self._set_forget_bias()

    @classmethod
    def seeded(cls, config: RecurrentConfig, generator: torch.Generator) -> "RecurrentLM":
        """A new model whose initial weights come from `generator` alone: the weights `torch.manual_seed(s)`
        then `RecurrentLM(config)` would give, for a generator seeded with s, without reading or seeding the
        process-wide generator (the app builds fresh models while other requests run)."""
        with torch.device("meta"):   # no weights drawn yet
            model = cls(config)
        model.to_empty(device="cpu")
        model.reset_parameters(generator)
        return model

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """The initial weights, drawn in the order construction draws them: E ~ N(0, 1) (nn.Embedding), every
        cell parameter ~ U(±1/√H), W_hy and b_y ~ U(±1/√H) (nn.Linear's kaiming_uniform with a = √5), then
        the LSTM's forget bias."""
        with torch.no_grad():
            nn.init.normal_(self.wte.weight, generator=generator)
            for cell in self.encoder.cells:
                _uniform_(cell, self.config.hidden_size, generator)
            nn.init.kaiming_uniform_(self.lm_head.weight, a=math.sqrt(5), generator=generator)
            bound = 1.0 / math.sqrt(self.config.hidden_size)
            nn.init.uniform_(self.lm_head.bias, -bound, bound, generator=generator)
        self._set_forget_bias()

    def _set_forget_bias(self) -> None:
        if self.config.cell != "lstm":
            return
        f = 0 if self.config.coupled else 1   # the forget rows: block 1 of (i, f, g, o), block 0 of (f, g, o)
        H = self.config.hidden_size
        with torch.no_grad():
            for cell in self.encoder.cells:   # b_if + b_hf = forget_bias (torch.nn.LSTM's init would give ~0)
                cell.bias_ih[f * H:(f + 1) * H].fill_(self.config.forget_bias / 2)
                cell.bias_hh[f * H:(f + 1) * H].fill_(self.config.forget_bias / 2)

    def num_params(self, recurrent_only: bool = False) -> int:
        params = self.encoder.parameters() if recurrent_only else self.parameters()
        return sum(p.numel() for p in params)

    def forward(self, idx, targets=None, state=None, return_internals: bool = False,
                clamp: dict[str, float] | None = None):
        """idx (B, T) -> logits (B, T, V), loss (mean cross-entropy, or None) [, internals: the encoder's,
        {"layers": [{"h", "c", "gates"}, ...]}, see `RecurrentEncoder.forward`]; `clamp`: gates held (a knockout)."""
        x = self.wte(idx)                                                     # (B, T, m)
        if return_internals:
            out, state, internals = self.encoder(x, state, return_internals=True, clamp=clamp)
        else:
            out, state = self.encoder(x, state, clamp=clamp)                  # (B, T, n)
        logits = self.lm_head(out)                                            # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        if return_internals:
            return logits, loss, internals
        return logits, loss

    @torch.no_grad()
    def step(self, idx, cache=None):
        """Incremental decoding: idx (B, T_new) are the new tokens only; cache is the recurrent state
        (torch.nn format). Returns logits (B, T_new, V) and the new cache."""
        out, state = self.encoder(self.wte(idx), cache)
        return self.lm_head(out), state

    def reorder_cache(self, cache, index):
        """Keep the batch rows `index` of the state (beam search): state tensors are (L*D, B, H)."""
        return tuple(s[:, index] for s in cache) if isinstance(cache, tuple) else cache[:, index]


# ---------------------------------------------------------------------------------------------
# Training hooks for `python -m playground.train rnn|lstm|gru` (registered in train.KINDS)

# Hidden sizes chosen so the three models have about the same number of parameters (~215k with the
# 65-character Tiny Shakespeare vocabulary): an LSTM step costs four Elman steps, a GRU step three.
DEFAULT_CONFIGS = {
    "rnn": RecurrentConfig(cell="rnn", n_embd=64, hidden_size=400),
    "lstm": RecurrentConfig(cell="lstm", n_embd=64, hidden_size=192),
    "gru": RecurrentConfig(cell="gru", n_embd=64, hidden_size=224),
}


def build_lm(config: RecurrentConfig, data) -> RecurrentLM:
    """The vocabulary size comes from the data's tokenizer, never typed in."""
    from dataclasses import replace

    return RecurrentLM(replace(config, vocab_size=data.vocab_size))


def parameter_counts(config: RecurrentConfig) -> dict:
    """Counts for card.json and the app: ours (== torch.nn's), and the lecture's formula beside it."""
    m, n = config.n_embd, config.hidden_size
    gates = {"rnn": 1, "lstm": 3 if config.coupled else 4, "gru": 3}[config.cell]
    per_layer = [gates * ((m if l == 0 else n) * n + n * n + 2 * n) for l in range(config.num_layers)]
    return {
        "m_input": m, "n_hidden": n, "gates": gates,
        "recurrent_torch": sum(per_layer),          # k(mn + n^2 + 2n): torch.nn keeps b_ih and b_hh
        "recurrent_formula": sum(gates * ((m if l == 0 else n) * n + n * n + n) for l in range(config.num_layers)),
        "formula": f"{gates}(mn + n² + n)",       # the lecture's LSTM count is the case of 4 gates
        "difference": "torch.nn keeps two bias vectors per gate (b_i* and b_h*); their sum acts as the one bias "
                      "of the lecture's formula, so torch counts k*n more per layer",
        "embedding": config.vocab_size * m, "head": n * config.vocab_size + config.vocab_size,
    }


def card_fields(model: RecurrentLM) -> dict:
    return {"cell": model.config.cell, "parameter_counts": parameter_counts(model.config),
            "tokens_are": "characters: val_bits_per_token is bits per character"}
