"""The cards' one schema (playground/checkpoints.py CARD and HELD_OUT): every shipped card.json uses only its names,
one name per figure, each with its meaning; the figures the tabs show are in the cards under those names."""

from __future__ import annotations

import json
import re

import pytest

from playground import checkpoints
from playground.analysis import models

CARDS = sorted(checkpoints.MODELS_DIR.glob("*/card.json"))


def test_the_schema_says_what_each_name_means():
    for schema in (checkpoints.CARD, checkpoints.HELD_OUT):
        for key, meaning in schema.items():
            assert re.fullmatch(r"[a-z][a-z0-9_]*", key), key
            assert isinstance(meaning, str) and meaning.strip(), (key, meaning)


@pytest.mark.parametrize("path", CARDS, ids=lambda p: p.parent.name)
def test_every_shipped_card_uses_only_the_schema_s_names(path):
    card = json.loads(path.read_text(encoding="utf-8"))
    unknown = sorted(set(card) - set(checkpoints.CARD))
    assert not unknown, f"{path.parent.name}: keys the schema (checkpoints.CARD) does not name: {unknown}"
    held_out = card.get("held_out", {})
    assert isinstance(held_out, dict), f"{path.parent.name}: held_out is not the figures' dict"
    unknown = sorted(set(held_out) - set(checkpoints.HELD_OUT))
    assert not unknown, f"{path.parent.name}: held_out keys checkpoints.HELD_OUT does not name: {unknown}"


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def test_the_figures_the_tabs_show_are_under_their_one_name():
    """Fill-in's cards table, Generation's labels and the RNN tab's table read these figures and no other name."""
    masked = [*models.ids("minilm-mlm"), *(n for n in models.ids("bert") if n != models.MINILM)]
    for name in masked:
        card = models.card(name)
        assert all(_number(card["held_out"][k]) for k in ("top1", "top5")), name
        assert all(_number(card[k]) for k in ("n_params", "steps", "wall_time_s")), name
    if "bert-english" in masked:
        assert _number(models.card("bert-english")["held_out"]["nsp_accuracy"])
    if "minilm-mlm" in masked:
        card = models.card("minilm-mlm")
        assert _number(card["trainable_params"]) and card["trainable_params"] < card["n_params"]
    for name in models.ids(*models.CAUSAL):
        card = models.card(name)
        assert _number(card["held_out"]["loss"]) and _number(card["n_params"]), name
    for name in models.ids("rnn", "lstm", "gru"):
        assert _number(models.card(name)["steps"]), name
    assert set(models.card(models.MINILM)) <= set(checkpoints.CARD)
