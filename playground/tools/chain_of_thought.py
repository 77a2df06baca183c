"""`python -m playground.tools.chain_of_thought [--limit N]`: SmolLM2's accuracy on the shipped word problems,
answered directly and step by step, written to assets/reasoning/results.json (what the Generation tab shows).

Every problem of assets/reasoning/word_problems.json, both ways, greedy decoding (temperature 0: the seed plays no
part), under analysis/reasoning.py's protocol. The file records the protocol, the count, each way's accuracy, every
reply with its extracted answer, the wall time and the command. `--limit N`: the first N problems only (a quick
look; the shipped file is the whole set).
"""

from __future__ import annotations

import argparse
import sys
import time

from playground.tools import GREEDY, write_results


def evaluate(m, problems: list[dict], progress=print) -> dict:
    """Both ways on every problem: {n, correct, accuracy, problems: [{id, question, expected, <way>: {...}}]}.
    `progress(text, partial)` after each problem, with the figures so far (the script writes them: an interrupted
    run leaves what it measured, marked incomplete)."""
    from playground.analysis import reasoning

    rows, correct = [], {way: 0 for way in reasoning.WAYS}
    for i, p in enumerate(problems, 1):
        data = reasoning.compare(m, p["question"], GREEDY, 0, [], expected=p["answer"])
        row = {"id": p["id"], "question": p["question"], "expected": p["answer"]}
        for way in reasoning.WAYS:
            got = data[way]
            correct[way] += bool(got["correct"])
            row[way] = {"text": got["text"], "answer": got["answer"], "correct": got["correct"],
                        "n_tokens": got["n_tokens"]}
        rows.append(row)
        progress(f"{i}/{len(problems)}: " + ", ".join(f"{w} {correct[w]}" for w in reasoning.WAYS),
                 _figures(rows, correct))
    return _figures(rows, correct)


def _figures(rows: list[dict], correct: dict) -> dict:
    n = len(rows)
    return {"n": n, "correct": dict(correct), "accuracy": {w: round(c / max(n, 1), 4) for w, c in correct.items()},
            "problems": list(rows)}


def main(argv: list[str] | None = None) -> None:
    from playground.analysis import models, reasoning

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="only the first N problems")
    parser.add_argument("--out", default=str(reasoning.RESULTS), help="where to write the results")
    args = parser.parse_args(argv)
    problems = reasoning.problems()[:args.limit]
    command = "python -m playground.tools.chain_of_thought " + " ".join(sys.argv[1:] if argv is None else argv)
    start = time.perf_counter()

    def write(text: str, figures: dict) -> None:
        print(text, flush=True)
        result = {"model": models.SMOLLM2, "protocol": reasoning.PROTOCOL, "decoding": "greedy",
                  "set": "assets/reasoning/word_problems.json", "set_size": len(reasoning.problems()),
                  "complete": figures["n"] == len(problems), **figures,
                  "seconds": round(time.perf_counter() - start, 1), "command": command}
        write_results(args.out, result)

    evaluate(models.get(models.SMOLLM2), problems, write)


if __name__ == "__main__":
    main()
