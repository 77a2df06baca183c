"""Tools on top of the package: the bench and the load test, a shipped model's held-out figures, the quantisation
gap, and the builder of a corpus file (WordNet's noun entries as sentences)."""

import json
import os

GREEDY = {"temperature": 0.0, "top_k": 0, "top_p": 1.0}   # the evaluations' decoding: the seed plays no part


def write_results(path: str, result: dict) -> None:
    """An evaluation's figures as JSON, replacing the file in one step: a reader (the app, at start) never sees half of
    it, and an interrupted run leaves the figures of its last finished item."""
    with open(path + ".part", "w", encoding="utf-8") as f:
        f.write(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    os.replace(path + ".part", path)
