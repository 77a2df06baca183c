"""Text normalisation: each step does exactly its job, in a fixed order."""

from __future__ import annotations

import pytest

from playground.analysis import normalize


def tokens(text, steps):
    return normalize.apply(text, steps)["stages"][-1]["tokens"]


def test_each_step():
    text = "The Cats weren't running, they're flying!"
    assert tokens(text, ["lowercase"])[:2] == ["the", "cats"]
    assert "," not in tokens(text, ["punctuation"]) and "!" not in tokens(text, ["punctuation"])
    assert tokens(text, ["stopwords"]) == ["Cats", "running", ",", "they're", "flying", "!"]  # weren't: auxiliary
    assert tokens("running flies happily", ["stem"]) == ["run", "fli", "happili"]  # Porter 1980


def test_stages_record_changes_and_removals():
    stages = normalize.apply("The Dog and the dog.", ["lowercase", "stopwords"])["stages"]
    assert [s["step"] for s in stages] == ["original", "lowercase", "stopwords"]
    assert stages[1]["changed"] == [0, 1] and stages[2]["removed"] == ["the", "and", "the"]
    assert stages[0]["n_types"] == 6 and stages[2]["n_types"] == 2  # The Dog and the dog . -> dog dog .


def test_order_is_fixed_whatever_the_request_order():
    assert [s["step"] for s in normalize.apply("x", ["stem", "lowercase"])["stages"]] == ["original", "lowercase", "stem"]


def test_unknown_step_and_odd_input():
    with pytest.raises(ValueError, match="unknown"):
        normalize.apply("x", ["uppercase"])
    assert normalize.apply("", list(normalize.STEPS))["stages"][-1]["tokens"] == []
    assert tokens("مرحبا 👋 ¿qué?", ["punctuation"]) == ["مرحبا", "👋", "qué"]


def test_stems_are_right_when_students_ask_at_once():
    """Three threads stemming at once (a served app computes each request on a thread of its own) get exactly what
    one thread gets: a stemmer shared between threads mixed their words up ('considered' -> 'condit', an IndexError)."""
    import sys
    import threading

    words = ["running", "considered", "generalizations", "happiness", "relational", "conditional", "better"] * 40
    alone = [normalize.stem(w) for w in words]
    found, failed = [], []

    def stem_all():
        try:
            for _ in range(30):
                found.append([normalize.stem(w) for w in words])
        except Exception as err:  # noqa: BLE001 - any failure is the finding
            failed.append(repr(err))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)                       # threads switch often, as under a class's load
    try:
        threads = [threading.Thread(target=stem_all) for _ in range(3)]
        [t.start() for t in threads]
        [t.join() for t in threads]
    finally:
        sys.setswitchinterval(interval)
    assert not failed and len(found) == 90 and all(stems == alone for stems in found), failed[:3]
