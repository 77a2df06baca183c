"""The bench's own calls (playground/tools/bench.py) run against the code as it is: a bench that breaks is found by
the suite, not by the next measurement. Timings are the bench's business, never asserted here."""

from playground.tools import bench


def test_the_handler_rows_call_the_handlers_as_they_are():
    calls = {**bench.endpoint_calls()}
    assert any("attention" in name for name in calls)
    for name, (fn, args, budget) in calls.items():
        assert fn(*args) is not None, name
        assert budget is None or budget > 0



def test_the_heads_rows_run():
    """The induction and head finder rows (`--heads-only`): every row has a figure (SmolLM2's only when installed)."""
    rows = bench.heads_rows(runs=1)
    assert [r[0].split(":")[0] for r in rows][-2:] == ["induction", "head_finder"]
    assert all(r[1] for r in rows)
