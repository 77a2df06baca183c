"""The bench's own calls (playground/tools/bench.py) run against the code as it is: a bench that breaks is found by
the suite, not by the next measurement. Timings are the bench's business, never asserted here."""

import pytest
from playground.tools import bench


@pytest.mark.slow
def test_the_handler_rows_call_the_handlers_as_they_are():
    calls = {**bench.endpoint_calls()}
    assert any("attention" in name for name in calls)
    for name, (fn, args, budget) in calls.items():
        assert fn(*args) is not None, name
        assert budget is None or budget > 0



@pytest.mark.slow
def test_the_heads_rows_run():
    """The induction and head finder rows (`--heads-only`): every row has a figure (SmolLM2's only when installed)."""
    rows = bench.heads_rows(runs=1)
    assert [r[0].split(":")[0] for r in rows][-2:] == ["induction", "head_finder"]
    assert all(r[1] for r in rows)
def test_the_causal_lab_rows_run_as_they_are(monkeypatch):
    """The GPT's row of `--causal-only` and its CPU seconds (SmolLM2's rows left out here: tests/test_interventions.py
    and tests/test_batched.py run their code)."""
    from playground.analysis import models
    from playground.tools import bench_causal

    resolve = models.resolve
    monkeypatch.setattr(models, "resolve", lambda name: None if name == models.SMOLLM2 else resolve(name))
    rows = bench_causal.causal_rows(runs=1)
    assert len(rows) == 2 and "32 positions" in rows[0][0] and rows[0][3] == "≤ 1 s"
    assert "CPU time" in rows[1][0] and float(rows[1][1].split()[0]) > 0
