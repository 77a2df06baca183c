"""The shipped corpus statistics of every attention model (assets/head_stats/*.json) are what the included command
computes: the corpus and protocol they record, their first window recomputed, our GPT's whole file recomputed."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from playground.analysis import attention as att
from playground.analysis import head_finder as hf
from playground.analysis import heads, models
from playground.tools import head_stats
from tests.tiers import slow_where

SHIPPED = sorted(hf.STATS_DIR.glob("*.json"))


def test_every_attention_model_has_its_statistics_shipped():
    assert {p.stem for p in SHIPPED} == set(models.ids("bert", "gpt", "llama"))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_the_file_records_the_corpus_the_protocol_and_the_command(path):
    record = json.loads(path.read_text(encoding="utf-8"))
    assert path.stat().st_size < 1_000_000
    corpus = hf.CORPUS.read_bytes()
    assert record["corpus"]["sha256"] == hashlib.sha256(corpus).hexdigest() == hf.corpus_record()["sha256"]
    p = record["protocol"]
    assert p["starts"] == hf.window_starts(corpus.decode("utf-8"), p["windows"], p["seed"])
    assert record["command"].startswith(f"python -m playground.tools.head_stats --model {path.stem} ")
    shape = models.shape(path.stem)
    assert (record["layers"], record["heads"]) == (shape.layers, shape.heads)
    for name in heads.STATS:
        table = np.array(record["stats"][name])
        assert table.shape == (shape.layers, shape.heads) and np.isfinite(table).all(), name
    assert 0 <= np.min(record["stats"]["previous"]) and np.max(record["stats"]["first"]) <= 1
    assert record["overlap"] != "not recorded"


@pytest.mark.parametrize("path", slow_where(SHIPPED, lambda path: "smollm2" in path.stem), ids=lambda p: p.stem)
def test_the_first_window_recomputed_is_the_files(path):
    """A slice of the protocol (its first window) through the model again: the same numbers."""
    record = json.loads(path.read_text(encoding="utf-8"))
    m = att.load(path.stem)
    text = hf.CORPUS.read_text(encoding="utf-8")
    ids = hf.window_ids(m, text, record["check"]["start"], record["protocol"]["tokens"])
    assert record["check"]["start"] == record["protocol"]["starts"][0] and len(ids) == record["check"]["n_tokens"]
    again = heads.stats(hf.attention_of(m, ids), ids)
    for name in heads.STATS:
        want = record["check"]["stats"][name]
        assert (want is None) == (again[name] is None), name
        if want is not None:
            np.testing.assert_allclose(again[name], want, atol=2e-4, err_msg=name)


@pytest.mark.slow
def test_our_gpts_whole_file_is_what_the_command_computes():
    """Every window of the protocol, pooled again with plain sums (not heads.Sums): the shipped means."""
    record = json.loads((hf.STATS_DIR / "gpt-shakespeare.json").read_text(encoding="utf-8"))
    m, text = att.load("gpt-shakespeare"), hf.CORPUS.read_text(encoding="utf-8")
    total = {name: 0.0 for name in heads.STATS}
    for start in record["protocol"]["starts"]:
        ids = hf.window_ids(m, text, start, record["protocol"]["tokens"])
        counts = heads.Sums().add(hf.attention_of(m, ids), ids)
        for name in heads.STATS:
            total[name] = total[name] + counts.sums[name]
    for name in heads.STATS:
        np.testing.assert_allclose(total[name] / record["queries"][name], record["stats"][name], atol=2e-5)


def test_the_command_writes_what_the_protocol_computes(tmp_path):
    written = head_stats.main(["--model", "gpt", "--windows", "2", "--tokens", "24", "--out", str(tmp_path)])
    record = json.loads((tmp_path / "gpt-shakespeare.json").read_text(encoding="utf-8"))
    assert written == [str(tmp_path / "gpt-shakespeare.json")] and record["protocol"]["windows"] == 2
    m, text = att.load("gpt"), hf.CORPUS.read_text(encoding="utf-8")
    total = heads.Sums()
    for start in record["protocol"]["starts"]:
        ids = hf.window_ids(m, text, start, 24)
        assert len(ids) == 24
        total.add(hf.attention_of(m, ids), ids)
    np.testing.assert_allclose(record["stats"]["entropy"], total.means()["entropy"], atol=1e-5)
    assert record["command"] == ("python -m playground.tools.head_stats --model gpt-shakespeare --windows 2 "
                                 "--tokens 24 --seed 0")


def test_windows_are_seeded_line_starts():
    text = "a\nbb\n\ncc\nd"
    assert hf.window_starts(text, 10, 0) == [0, 2, 6, 9]  # every non-empty line, in order
    assert hf.window_starts(text, 2, 0) == hf.window_starts(text, 2, 0)
    assert len(hf.window_starts(text, 2, 1)) == 2


def test_a_model_without_a_shipped_file_gets_the_command_to_make_it(tmp_path):
    with pytest.raises(hf.HeadStatsError, match="python -m playground.tools.head_stats --model nope"):
        hf.shipped("nope", tmp_path)
