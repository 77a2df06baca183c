"""The RNN gradient-flow tab: how far back the training signal reaches in an Elman RNN, an LSTM and a GRU,
why (the Jacobians, the carousel, the update gate), the gates over time, and clipping."""

from __future__ import annotations

import gradio as gr

from playground.figures import gradient_flow as fg
from playground.analysis import gradient_flow as flow
from playground.analysis import models
from playground.training import memory as memory_task
from playground.ui.common import (FIGURE, LATEX, Shared, as_int, as_number, chosen, json_file, left_out, text_input,
                                  things_to_try, warn)
from playground.ui.gpu import gpu

CELLS = {"rnn": "Elman RNN", "lstm": "LSTM", "gru": "GRU"}
ACTIVATIONS = ("tanh", "relu", "sigmoid")
# The cells whose trained model the registry has (analysis/models.py: `<cell>-shakespeare`, loaded on first use,
# read-only; a missing or damaged one is left out, checkpoints.damaged says why). They share one character vocabulary.
LISTED = [key for key in CELLS if models.resolve(f"{key}-shakespeare") is not None]
LENGTH_MAX = flow.MAX_STEPS
CLIP_MAX = 1e6
GATE_UNITS = 32
MEMORY_K_MAX, MEMORY_STEPS_MAX = 100, 2000
MEMORY_CACHED = memory_task.load_cached()   # a recorded real run, shown before anyone presses Run


# ---------------------------------------------------------------------------------------------
# Handlers


def _number(value, name: str, low: float, high: float, notices: list[str]) -> float:
    """A float in [low, high], clamped with a notice that says why."""
    x = as_number(value, name)
    if x < low or x > high:
        clamped = min(max(x, low), high)
        why = " (a norm cannot be negative)" if x < 0 else ""
        notices.append(f"{name} {x:g} is out of range{why}; using {clamped:g} (allowed: {low:g} to {high:g}).")
        return clamped
    return x


def _knockout(value) -> str:
    if not isinstance(value, str) or value not in KNOCKOUT_CHOICES:
        raise gr.Error(f"Knockout should be one of {', '.join(KNOCKOUT_CHOICES)}.")
    return value


def gradient_flow(text, length=100, cells=("rnn", "lstm", "gru"), weights="trained", rescale=False, sigma=1.0,
                  activation="tanh", clip=0.0, knockout="none"):
    """Back-propagate the loss at the last character through each chosen network (a gate knocked out, if asked)."""
    notices: list[str] = []
    text = text_input(text, notices)
    if not text.strip():
        raise gr.Error("The text is empty: type a sentence (a few characters are enough; it is repeated to the "
                       "chosen length).")
    T = as_int(length, "Sequence length", 2, LENGTH_MAX, notices)
    cells = chosen(cells, CELLS, "network")
    for key in cells:
        if models.resolve(f"{key}-shakespeare") is None:
            raise left_out(f"{key}-shakespeare", f"{CELLS[key]} model")
    trained = {key: models.get(f"{key}-shakespeare") for key in cells}
    if weights not in ("trained", "fresh"):
        raise gr.Error("Weights should be 'trained' or 'fresh'.")
    if activation not in ACTIVATIONS:
        raise gr.Error(f"Activation should be one of {', '.join(ACTIVATIONS)}.")
    s = _number(sigma, "σ_max of W_hh", *flow.SIGMA_RANGE, notices) if rescale else None
    theta = _number(clip, "Clipping threshold", 0.0, CLIP_MAX, notices)
    knockout = _knockout(knockout)
    if knockout != "none" and memory_task.KNOCKOUTS[knockout][0] not in cells:
        notices.append(f"The knockout holds a gate of the {CELLS[memory_task.KNOCKOUTS[knockout][0]]}, which is not "
                       "among the networks shown.")
    warn(notices)  # the values the user set and we changed: a toast; the text's notices go in the panel
    data, steps = flow.compare({key: m.model for key, m in trained.items()}, trained[cells[0]].tokenizer, text, T,
                               fresh=weights == "fresh", sigma=s, activation=activation, clip=theta,
                               units=GATE_UNITS, notices=notices, knockout=knockout)
    results, labels = data["cells"], {key: CELLS[key] for key in cells}
    gates_plots = [fg.gates_figure(results[key]["gates"], steps.chars, CELLS[key])
                   if key in results and results[key]["gates"] else None for key in ("lstm", "gru")]
    return (fg.gradient_status_html(results, labels, steps.notices),
            fg.gradient_flow_figure(results, labels, steps.chars, steps.spans),
            fg.gradient_strip_html(steps.chars, results, labels),
            *[gr.update(value=fig, visible=fig is not None) for fig in gates_plots],
            json_file(data, "gradient-flow"), data)


def _memory_views(result: dict, live: bool):
    acc, loss = fg.memory_figures(result, CELLS)
    made = result["made"]
    how = ("computed just now" if live
           else f"a cached run of `{made.get('command', 'python -m playground.training.memory')}`"
           f" ({made.get('date', '')}); press *Run live* to train the networks again")
    cfg = result["config"]
    ks = result["k"]
    lines = [f"**{'Live' if live else 'Cached'} result**: {how}. {made['seconds']:.0f} s on {made['threads']} "
             f"thread(s), torch {made['torch']}. Distances k = {', '.join(map(str, ks))}; sequences of "
             f"{cfg['max_k'] + 2} tokens, hidden size {cfg['hidden_size']}, {cfg['steps']} Adam steps per network "
             f"and distance, seed {cfg['seed']}."]
    for key, r in result["cells"].items():
        learned = [k for k, a in zip(ks, r["accuracy"]) if a >= 0.9]
        reach = f"up to k = {max(learned)}" if learned else "at no distance"
        lines.append(f"- {CELLS[key]}: at least 90% correct {reach} (accuracy {r['accuracy'][-1]:.2f} at k = "
                     f"{ks[-1]}), {r['n_params']:,} recurrent parameters, {r['seconds']:.0f} s")
    return acc, loss, "\n".join(lines)


@gpu(duration=120)  # ZeroGPU: three cells x up to MEMORY_STEPS_MAX steps
def memory_experiment(max_k=30, steps=300, hidden_size=32, seed=0, knockout="none", progress=gr.Progress()):
    """Train an Elman RNN, an LSTM and a GRU of the same hidden size on the memory task, live (a gate knocked out
    in training and testing, if asked)."""
    notices: list[str] = []
    cfg = memory_task.MemoryConfig(max_k=as_int(max_k, "Longest distance k", 1, MEMORY_K_MAX, notices),
                                   steps=as_int(steps, "Training steps", 10, MEMORY_STEPS_MAX, notices),
                                   hidden_size=as_int(hidden_size, "Hidden size", 4, 128, notices),
                                   seed=as_int(seed, "Seed", 0, 2**31 - 1, notices), knockout=_knockout(knockout))
    warn(notices)
    progress(0, desc="starting")
    result = memory_task.run(cfg, lambda fraction, message: progress(fraction, desc=message))
    return (*_memory_views(result, live=True), result)


# ---------------------------------------------------------------------------------------------
# Layout and events


def models_md() -> str:
    """The table of the trained models: their parameters (torch's count and the lecture's), held-out loss, steps."""
    rows = []
    for key, model in flow.model_table({key: models.get(f"{key}-shakespeare") for key in LISTED}).items():
        n, m = model["n_hidden"], model["m_input"]
        rows.append(f"| {CELLS[key]} | {n} | {model['n_params']:,} | {model['formula']} = "
                    f"{model['recurrent_formula']:,} | {model['recurrent_torch']:,} | "
                    f"{model['held_out_loss']:.3f} | {model['held_out_bits']:.2f} | {model['steps']:,} |")
    return ("The trained weights: character-level language models on Tiny Shakespeare, sized to about the same "
            f"number of parameters (input m = {m}, a learned embedding; hidden n per cell).\n\n"
            "| cell | n | parameters (all) | lecture formula, recurrent part | torch.nn count "
            "| held-out loss (nats/char) | bits/char | steps |\n|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) +
            "\n\nThe lecture counts four gates of weight $[(m+n) \\times n]$ and one bias each: $4(mn + n^2 + n)$ "
            "for the LSTM (three gates for the GRU, one for the Elman RNN). `torch.nn` (and our cells, which share its "
            "layout) keep two bias vectors per gate, $b_{i\\ast}$ and $b_{h\\ast}$, whose sum acts as the one bias, "
            "so they count $4n$ more per LSTM layer.")


FLOW_LEAD_MD = r"""**How far back does the training signal reach?** The loss at the last character is back-propagated
through time; the plot shows how much of it arrives at each earlier step, in an Elman RNN, an LSTM and a GRU. The
mathematics is under the plot."""

FLOW_MD = (r"""The loss at the last character, $L_T = -\log p(x_{T+1} \mid x_1, \dots, x_T)$, is back-propagated through
time. In the Elman RNN, $h_t = \phi(a_t)$ with $a_t = W_{ih} x_t + W_{hh} h_{t-1} + b$, so
each step back multiplies the gradient by one Jacobian:
$$\frac{\partial L_T}{\partial h_{t-1}} = W_{hh}^\top \,\mathrm{diag}\big(\phi'(a_t)\big)\, """
r"""\frac{\partial L_T}{\partial h_t}.$$
After $T - t$ steps the signal has gone through $T - t$ of these factors. None can stretch a vector by more than
$\max \phi' \cdot \sigma_{\max}(W_{hh})$: when that is below 1 the gradient dies off geometrically (vanishing); it can
only blow up (exploding) when $\sigma_{\max}(W_{hh})$ is large enough, above $1/\max\phi'$ (Bengio et al. 1994;
Pascanu et al. 2013). A random direction would shrink by about $\bar\gamma \cdot \lVert W_{hh} \rVert_F / \sqrt{n}$
(the mean activation derivative times the root-mean-square singular value), but the gradient is not random for
long: multiplied by one Jacobian after another it turns, as in power iteration, towards the directions that shrink
least, and then shrinks at the product's top Lyapunov exponent. The table's prediction computes that exponent from
the weights and this input's $\phi'(a_t)$ alone (a random start vector, no loss), beside the factor fitted to the
curve and the naive estimate, which is 2 to 4 times too small.

**LSTM**: the cell state is updated additively, $c_t = f_t \odot c_{t-1} + i_t \odot g_t$, so
$\partial c_t / \partial c_{t-1} = \mathrm{diag}(f_t)$: no weight matrix and no squashing on that path. Where the
forget gate stays near 1 the gradient rides the cell unchanged (the *constant error carousel*); the dashed line is
$\lVert \partial L_T / \partial c_t \rVert$. The prediction multiplies the $f_t$ unit by unit: the units whose
forget gate stays open soon carry all of the gradient, so the factor is well above the mean $f_t$.
**GRU**: we use Cho et al. 2014's convention, which is also what `torch.nn.GRU` computes (so our weights match it):
$h_t = (1 - z_t) \odot n_t + z_t \odot h_{t-1}$. Here $z_t \to 1$ *keeps* the old state, and
$\partial h_t/\partial h_{t-1}$ contains $\mathrm{diag}(z_t)$ directly (predicted, unit by unit, as for the LSTM; the
other term of the Jacobian is left out, so the prediction is a little low).
Some lecture notes write the same cell with $z_t$ and $1 - z_t$ swapped, which just renames the gate.

**Controls.** *Fresh* weights use PyTorch's initialisation, $U(-1/\sqrt n, 1/\sqrt n)$. *Rescale* sets the largest
singular value of every recurrent block $W_{h\ast}$ to $\sigma_{\max}$. The activation applies to the Elman cell only
(gated cells keep their sigmoids and tanh). *Clipping* with threshold $\theta > 0$ rescales the gradient sent back into
$h_t$ (and $c_t$) at every step, $g \leftarrow \theta\, g / \lVert g \rVert$ when $\lVert g \rVert > \theta$. That is
the lecture's rule applied to the back-propagated error; Pascanu et al. clip the whole parameter gradient once per
update instead. Everything is computed in float64, so a norm can reach about $10^{308}$ before it overflows; an overflow
is flagged in red, never shown as a silent NaN.""")

STRIP_MD = r"""**Which characters does the last prediction's loss depend on?** Each input character is shaded by
$\lVert \partial L_T / \partial x_t \rVert$, the gradient with respect to its embedding (log scale, per network;
hover for the value). The character outlined in red is the target $x_{T+1}$."""

GATES_MD = r"""**Gates over time** (the first 32 units; hover for values). LSTM: forget $f_t$, input $i_t$, output
$o_t$ (all in $[0, 1]$, from a sigmoid) and the cell $c_t$ (unbounded; red negative, blue positive). GRU: update $z_t$
(1 = keep the old state) and reset $r_t$ (0 = ignore $h_{t-1}$ when proposing $n_t$)."""


MEMORY_MD = r"""**Who can learn to remember a token k steps back?** Each sequence is a random string of 4 *key* symbols
and 4 noise symbols; a *marker* stands just before the key to remember, k steps before the end, and after the last token
the network must name that key (chance: 25%). The keys after it are distractors, so the network has to hold the
marked one. The only training signal is the loss at the last step, which must travel k steps back through time to
reach the key: the gradient flow of the other view, now deciding what can be learned. For each distance k on the
x axis, the three networks are trained afresh (with Adam, the global gradient norm clipped at 1) on distances drawn
from 1 to k, then tested on 64 new sequences at exactly k. They share the hidden size $n$ (so the LSTM has about
$4\times$ the Elman parameters, the GRU $3\times$). The Elman RNN learns the short distances and fails beyond a
dozen steps; the gated cells, whose gradient rides $\mathrm{diag}(f_t)$ or $\mathrm{diag}(z_t)$, hold on. (Trained once
on every distance up to the longest, a network learns a latch that works at every distance or none at all: a flat
curve, which is why each distance gets its own training.) The default run takes about half a minute on a 2-core
CPU."""


TRY = [("a short sentence", ["To be, or not to be."]),
       ("a long one",
        ["Now is the winter of our discontent made glorious summer by this sun of York, and all the clouds "
                       "that lowered upon our house in the deep bosom of the ocean buried; now are our brows bound."]),
       ("one letter again and again", ["a" * 120])]


def build(demo: gr.Blocks, shared: Shared) -> None:
    """The tab's components and events; the gradient flow runs on the sentence shared by every tab."""
    things_to_try(TRY, [shared.text])
    with gr.Tabs():
        with gr.Tab("Gradient flow through time"):
            _build_flow(demo, shared)
        with gr.Tab("Memory experiment (live)"):
            _build_memory()


KNOCKOUT_CHOICES = {"none": "none", "forget-0": "LSTM forget gate held at 0 (forgets at once)",
                    "forget-1": "LSTM forget gate held at 1 (never forgets)",
                    "update-0": "GRU update gate held at 0 (h_t = n_t)",
                    "update-1": "GRU update gate held at 1 (h_t = h_{t−1})"}


def knockout_radio() -> gr.Radio:
    """A gate knocked out (held at 0 or 1 in the cell's equations; the weights untouched), or none."""
    return gr.Radio([(label, key) for key, label in KNOCKOUT_CHOICES.items()], value="none", label="Knock out a gate")


def _build_memory() -> None:
    gr.Markdown(MEMORY_MD, latex_delimiters=LATEX)
    cached = _memory_views(MEMORY_CACHED, live=False) if MEMORY_CACHED else (None, None, "No cached run yet.")
    with gr.Row():
        max_k = gr.Slider(1, MEMORY_K_MAX, value=30, step=1, label="Longest distance k")
        steps = gr.Slider(10, MEMORY_STEPS_MAX, value=300, step=10, label="Training steps per network")
        hidden = gr.Slider(4, 128, value=32, step=1, label="Hidden size n (all three)")
        seed = gr.Number(0, precision=0, label="Seed")
        knockout = knockout_radio()
        run = gr.Button("Run live", variant="primary", elem_id="mem-run")
    about = gr.Markdown(cached[2], elem_id="mem-about")
    with gr.Row():
        acc_plot = gr.Plot(cached[0], label="Accuracy against k", elem_id="mem-acc")
        loss_plot = gr.Plot(cached[1], label="Loss curves", elem_id="mem-loss")
    with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
        mem_json = gr.JSON(MEMORY_CACHED, label="memory_experiment")
    run.click(memory_experiment, inputs=[max_k, steps, hidden, seed, knockout],
              outputs=[acc_plot, loss_plot, about, mem_json],
              api_name="memory_experiment", show_progress="full")


def _build_flow(demo: gr.Blocks, shared: Shared) -> None:
    sentence = shared.text  # the committed sentence (see Shared)
    gr.Markdown(FLOW_LEAD_MD, latex_delimiters=LATEX)  # the controls come first, the mathematics under the plot
    with gr.Row():
        with gr.Column(scale=2):
            cells = gr.CheckboxGroup([(label, key) for key, label in CELLS.items()], value=list(CELLS),
                                     label="Networks")
            length = gr.Slider(2, LENGTH_MAX, value=100, step=1, label="Sequence length T (the sentence is repeated "
                               "or cut to fit)")
            weights = gr.Radio([("trained on Tiny Shakespeare", "trained"), ("fresh (untrained)", "fresh")],
                               value="trained", label="Weights")
        with gr.Column(scale=2):
            with gr.Row():
                rescale = gr.Checkbox(False, label="Rescale W_hh to this σ_max")
                sigma = gr.Slider(0.01, 10, value=1.0, step=0.01, label="σ_max of W_hh")
            activation = gr.Radio(list(ACTIVATIONS), value="tanh", label="Elman activation φ")
            clip = gr.Slider(0, 10, value=0, step=0.1, label="Gradient clipping threshold θ (0: off)")
            knockout = knockout_radio()
            run = gr.Button("Back-propagate", variant="primary")
    status = gr.HTML(elem_id="gf-status")
    flow_plot = gr.Plot(label="Gradient norm per time step", elem_id="gf-plot")
    with gr.Accordion("The mathematics: Jacobians, gates and the controls", open=True):
        gr.Markdown(FLOW_MD, latex_delimiters=LATEX)
    gr.Markdown(STRIP_MD, latex_delimiters=LATEX)
    strip = gr.HTML(elem_id="gf-strip", elem_classes=FIGURE)
    gr.Markdown(GATES_MD, latex_delimiters=LATEX)
    lstm_gates = gr.Plot(label="LSTM gates", elem_id="gf-lstm-gates")
    gru_gates = gr.Plot(label="GRU gates", elem_id="gf-gru-gates")
    with gr.Accordion("The trained models and their parameter counts", open=False):
        gr.Markdown(models_md(), latex_delimiters=LATEX)
    with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
        flow_file = gr.DownloadButton("Download JSON", size="sm")
        flow_json = gr.JSON(label="gradient_flow")

    shared.remember("rnn", length=length, cells=cells, weights=weights, rescale=rescale, sigma=sigma,
                    activation=activation, clip=clip)
    inputs = [sentence, length, cells, weights, rescale, sigma, activation, clip, knockout]
    gr.on([demo.load, shared.changed("restored"), run.click, shared.changed("text"), cells.change, weights.change,
           rescale.change, activation.change, knockout.change, length.release, sigma.release, clip.release],
          gradient_flow, inputs=inputs,
          outputs=[status, flow_plot, strip, lstm_gates, gru_gates, flow_file, flow_json],
          api_name="gradient_flow", trigger_mode="always_last", show_progress="minimal")
