"""The head finder and the induction view through gradio_client (the endpoints `head_finder` and `induction`), their
figures' text alternatives computed from the same numbers, and the odd inputs they refuse with a message."""

from __future__ import annotations

import json

import numpy as np
import pytest
from gradio_client.exceptions import AppError

from playground.analysis import head_finder as hf
from playground.analysis import heads
from playground.figures import heads as fh

REPEATED = "the cat saw the cat and the dog saw the dog"


def finder(client, text=REPEATED, model="gpt-shakespeare", source="text", stat="induction", order="largest"):
    return client.predict(text, model, source, stat, order, api_name="/head_finder")


def test_head_finder_over_the_corpus_is_the_shipped_file_ranked(client):
    plot, table, chosen, path, data = finder(client, "", "minilm", "corpus", "previous")
    shipped = hf.shipped("minilm")
    assert data["stats"] == shipped["stats"] and data["protocol"]["windows"] == shipped["protocol"]["windows"]
    values = [r["previous"] for r in data["ranking"]]
    assert len(values) == 6 * 12 and values == sorted(values, reverse=True)
    first = data["ranking"][0]
    assert first["previous"] == np.max(shipped["stats"]["previous"])
    assert f"| 1 | {first['layer']} | {first['head']} |" in table  # the text alternative: the same ranking
    with open(path, encoding="utf-8") as f:
        assert json.load(f)["ranking"] == data["ranking"]


def test_head_finder_on_the_text_is_computed_now_and_orders_both_ways(client):
    *_, data = finder(client)
    assert data["source"] == "text" and len(data["tokens"]) == len(REPEATED)
    *_, low = finder(client, order="smallest")
    assert [r["induction"] for r in low["ranking"]] == sorted(r["induction"] for r in data["ranking"])
    assert {(r["layer"], r["head"]) for r in low["ranking"]} == {(r["layer"], r["head"]) for r in data["ranking"]}


def test_head_finder_refuses_what_it_cannot_rank(client):
    with pytest.raises(AppError, match="Type a sentence"):
        finder(client, "   ")
    with pytest.raises(AppError, match="one token"):
        finder(client, "a")
    with pytest.raises(AppError, match="no token occurs twice"):
        finder(client, "abc")
    with pytest.raises(AppError, match="beauty"):  # gradio refuses a choice its dropdown does not have
        finder(client, stat="beauty")


def test_induction_endpoint_returns_its_figures_text_and_numbers(client):
    loss_plot, scatter, summary, path, data = client.predict("gpt-shakespeare", 12, 3, api_name="/induction")
    assert data["n"] == 12 and len(data["ids"]) == 24 and data["ids"][:12] == data["ids"][12:]
    assert len(data["losses"]) == 23 and np.array(data["induction"]).shape == (4, 6)
    assert f"**{data['first_copy_loss']:.2f}**" in summary and f"**{data['second_copy_loss']:.2f}**" in summary
    again = client.predict("gpt-shakespeare", 12, 3, api_name="/induction")[-1]
    assert again == data  # seeded: the same sequence, the same numbers


def test_induction_clamps_and_refuses_with_messages(client):
    data = client.predict("gpt", 100, 0, api_name="/induction")[-1]  # gradio refuses beyond the slider
    assert data["n"] == 64 and data["model"] == "gpt-shakespeare"   # 128 positions hold two copies of 64
    with pytest.raises(AppError, match="causal language model"):
        client.predict("minilm", 10, 0, api_name="/induction")


def test_induction_knocks_out_the_top_heads_and_as_many_others(client):
    """The trailing `knock_out` input: the JSON names the k heads of highest induction score and k others, gives
    the three runs' losses, the loss figure draws them, and the text says their second-copy means."""
    loss_plot, _, summary, _, data = client.predict("gpt-shakespeare", 12, 3, 2, api_name="/induction")
    a = data["ablation"]
    top = sorted(((s, l, h) for l, row in enumerate(data["induction"]) for h, s in enumerate(row)), reverse=True)
    assert a["k"] == 2 and [(h["layer"], h["head"]) for h in a["induction_heads"]] == [(l, h) for _, l, h in top[:2]]
    assert not {(h["layer"], h["head"]) for h in a["control_heads"]} & {(l, h) for _, l, h in top[:2]}
    assert a["runs"]["none"]["losses"] == pytest.approx(data["losses"], abs=1e-3)
    for name in ("none", "induction_heads", "control_heads"):
        assert len(a["runs"][name]["losses"]) == 23
        assert f"**{a['runs'][name]['second_copy_loss']:.2f}**" in summary
    assert "Knockout" in summary
    assert "ablation" not in client.predict("gpt-shakespeare", 12, 3, api_name="/induction")[-1]  # k = 0: none


def test_the_finder_opens_on_a_statistic_that_fits_the_model_on_a_stated_scale():
    """MiniLM (the tab's default, a BERT) is ranked by previous-token score, a causal LM by induction; a share of
    attention is coloured from 0 to 1 (MiniLM's largest induction score, 0.04, stays pale), entropy and distance
    from 0 to their largest, said on the colour bar."""
    from playground.ui import attention_heads

    assert [attention_heads.fitting_stat(m) for m in ("minilm", "bert", "gpt", "smollm2")] == [
        "previous", "previous", "induction", "induction"]
    shipped = hf.shipped("minilm")["stats"]
    for stat, top in (("induction", 1.0), ("previous", 1.0), ("entropy", float(np.max(shipped["entropy"])))):
        data = {"stat": stat, "source": "corpus", "order": "largest", "layers": 6, "heads": 12, "stats": shipped,
                "ranking": [{"layer": 0, "head": 0}]}
        heat = fh.finder_figure(data, 1).data[0]
        assert (heat.zmin, heat.zmax) == (0, pytest.approx(top)) and "0 to" in heat.colorbar.title.text
    assert np.max(shipped["induction"]) < 0.05 and np.max(shipped["previous"]) > 0.9


def test_the_figures_and_their_text_alternatives():
    data = {"stat": "entropy", "source": "corpus", "order": "smallest", "layers": 2, "heads": 2,
            "corpus": "assets/corpus_sample.txt", "protocol": {"windows": 3},
            "stats": {k: [[0.1, 0.2], [0.3, 0.4]] for k in heads.STATS},
            "ranking": [{"layer": 0, "head": 0, **dict.fromkeys(heads.STATS, 0.1)}]}
    fig = fh.finder_figure(data, 1)
    assert [t.type for t in fig.data] == ["heatmap", "scatter"] and fig.data[1].y == ("layer 0",)
    assert "| 1 | 0 | 0 | **0.100** | 0.100 |" in fh.finder_md(data, 1, heads.STATS)
    ind = {"label": "a model", "n": 3, "seed": 0, "prefix": 0, "losses": [1.0, 2.0, 3.0, 0.5, 0.4],
           "first_copy_loss": 2.5, "second_copy_loss": 0.45, "chance_loss": 4.0, "vocabulary": 55,
           "induction": [[0.9, 0.1]], "previous": [[0.0, 0.8]], "duplicate": [[0.0, 0.0]]}
    assert len(fh.copy_loss_figure(ind).data[0].y) == 5
    assert list(fh.scores_figure(ind).data[0].y) == [0.9, 0.1]
    md = fh.induction_md(ind, k=1)
    assert "falls by 2.05 nats" in md and "| 0 | 0 | 0.900 | 0.000 |" in md and "| 0 | 1 | 0.100 | 0.800 |" in md
    runs = {"none": [1.0, 2.0, 3.0, 0.5, 0.4], "induction_heads": [1.0, 2.0, 3.0, 2.5, 2.4],
            "control_heads": [1.0, 2.0, 3.0, 0.6, 0.4]}
    ind["ablation"] = {"k": 1, "how": "zero", "control": "1 other head", "induction_heads": [{"layer": 0, "head": 0}],
                       "control_heads": [{"layer": 0, "head": 1}],
                       "runs": {k: {"losses": v, "second_copy_loss": float(np.mean(v[3:]))} for k, v in runs.items()}}
    fig = fh.copy_loss_figure(ind)
    assert [list(t.y) for t in fig.data[1:]] == [runs["induction_heads"], runs["control_heads"]]
    md = fh.induction_md(ind, k=1)
    assert "**0.45** nats as it is, **2.45** without the top 1 induction heads (0.0)" in md
    assert "**0.50** without 1 other head (0.1)" in md and "undoes much more" in md


def test_the_loss_figures_notes_never_share_a_place():
    """Equal means (a model that does not copy) drew "first copy's mean" and "second copy's mean" on top of each
    other at the figure's right edge (issue #54): each copy's mean is named at its own copy's end, chance at the
    start."""
    ind = {"label": "a model", "n": 3, "seed": 0, "prefix": 0, "losses": [4.0] * 6, "first_copy_loss": 4.0,
           "second_copy_loss": 4.0, "chance_loss": 4.0, "vocabulary": 55}
    notes = {a.text: (a.xref, a.x, a.xanchor) for a in fh.copy_loss_figure(ind).layout.annotations if a.yref == "y"}
    assert notes == {"first copy's mean 4.00": ("x", 2.5, "right"), "second copy's mean 4.00": ("x", 5.5, "right"),
                     "chance: ln(vocabulary) 4.00": ("x", -0.5, "left")}


def test_a_model_without_attention_is_refused_with_the_models_that_have_it():
    import gradio as gr

    from playground.ui import attention_heads

    with pytest.raises(gr.Error, match="choose from minilm"):
        attention_heads.head_finder(REPEATED, "lstm-shakespeare", "corpus", "previous", "largest")
    with pytest.raises(gr.Error, match="choose from gpt-shakespeare"):
        attention_heads.induction("lstm-shakespeare", 10, 0)
    with pytest.raises(gr.Error, match="Rank the heads first"):
        attention_heads.open_head(None, "minilm")


def test_the_head_views_knockout_is_the_causal_labs_ablation_of_that_head(monkeypatch):
    """The head view's "Knock it out": a numbered head is that head, an aggregate the layer's attention; a masked LM
    without a [MASK] in the sentence gets its last word masked; MiniLM, the tab's default (an encoder without an LM
    head), through its masked LM, said; without that, refused naming only models the tab lists."""
    import gradio as gr

    from playground.analysis import interventions as iv
    from playground.analysis import models
    from playground.ui import attention_heads

    _, text, data = attention_heads.knock_out("ROMEO:\nI will", "gpt", 1, "2", "zero")
    expected = iv.ablate(models.get("gpt-shakespeare"), "ROMEO:\nI will", "head", 1, 2, "zero")
    assert (data["target"], data["layer"], data["head"]) == ("head", 1, 2) and data["kl"] == expected["kl"] > 0
    assert f"{data['kl']:.4f}" in text
    layer = attention_heads.knock_out("ROMEO:\nI will", "gpt-shakespeare", 2, "mean")[-1]
    assert (layer["target"], layer["layer"], layer["head"]) == ("attn", 2, None)
    masked = attention_heads.knock_out("The cat sat on the mat.", "bert-english", 0, "1")[-1]
    assert masked["tokens"][masked["position"]] == "[MASK]" and "mat" not in masked["tokens"]
    _, text, minilm = attention_heads.knock_out("The cat sat on the mat.", "minilm", 5, "3")
    expected = iv.ablate(models.get("minilm-mlm"), "The cat sat on the [MASK].", "head", 5, 3, "zero")
    assert minilm["model"] == "minilm-mlm" and minilm["kl"] == pytest.approx(expected["kl"], abs=1e-6) and minilm["kl"] > 0
    assert text.startswith("*MiniLM-L6 has no LM head: its head 3 of layer 5 is knocked out in MiniLM + LoRA")
    monkeypatch.setattr(attention_heads, "WITH_LM_HEAD", {})
    with pytest.raises(gr.Error, match="no prediction to change") as refused:
        attention_heads.knock_out("The cat sat.", "minilm", 0, "0")
    assert "minilm-mlm" not in str(refused.value) and "MINILM" not in str(refused.value)
    with pytest.raises(gr.Error, match="Type a sentence"):
        attention_heads.knock_out("   ", "bert-english", 0, "0")
