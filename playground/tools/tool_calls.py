"""`python -m playground.tools.tool_calls [--limit N]`: how often SmolLM2 calls the right tool with the right arguments,
on the shipped questions (assets/reasoning/tool_questions.json: five per tool), written to
assets/reasoning/tool_results.json (what the Generation tab shows beside the loop).

Each question goes through `analysis/tool_calling.run` as the app's default runs it: the first reply's call forced,
greedy decoding, at most MAX_TURNS model turns. Counted per question, each a subset of the one before:
- `parses`: the first reply's call is well-formed (JSON, a list of {name, arguments});
- `right_tool`: it calls the question's tool;
- `right_result`: that tool, run on the model's arguments, gives the question's result (the arguments were right);
and, apart, `answered`: the loop's final answer in words holds the question's result (a last reply that only
repeats the `<tool_response>` is no answer: `stopped` is "echo").
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time

from playground.checkpoints import ASSETS_DIR
from playground.tools import GREEDY, write_results

QUESTIONS = ASSETS_DIR / "reasoning" / "tool_questions.json"
COUNTS = ("parses", "right_tool", "right_result", "answered")


def questions() -> list[dict]:
    return json.loads(QUESTIONS.read_text(encoding="utf-8"))["questions"]


def expected(q: dict, count_tokens) -> object:
    """The question's result: as written, or (count_tokens) the app's count of its text."""
    return count_tokens(q["arguments"]["text"]) if q["tool"] == "count_tokens" else q["result"]


def _holds(text: str | None, result) -> bool:
    """Whether a reply states the result: the city, or the number (thousands separators ignored)."""
    if not text:
        return False
    if isinstance(result, str):
        return result.lower() in text.lower()
    numbers = re.findall(r"-?\d+(?:\.\d+)?", text.replace(",", ""))
    return any(float(n) == float(result) for n in numbers)


def score(q: dict, data: dict, want) -> dict:
    """One question's row: what its first call was, and each count's verdict."""
    first = data["turns"][0]
    calls = first["tool_calls"] or []
    results = first["results"]
    row = {"id": q["id"], "question": q["question"], "tool": q["tool"], "expected": want,
           "first_reply": first["reply"], "parse_error": first["parse_error"], "answer": data["answer"],
           "stopped": data["stopped"], "last_reply": data["turns"][-1]["reply"]}
    row["parses"] = first["parse_error"] is None and bool(calls)
    row["right_tool"] = row["parses"] and calls[0]["name"] == q["tool"]
    row["right_result"] = row["right_tool"] and bool(results) and "result" in results[0] and \
        _holds(str(results[0]["result"]), want)
    row["answered"] = _holds(data["answer"], want)
    return row


def evaluate(m, items: list[dict], progress=print) -> dict:
    """Every question through the loop: {n, counts, rows}. `progress(text, figures)` after each."""
    from playground.analysis import tool_calling

    count = tool_calling.token_counter(m)
    rows = []
    for i, q in enumerate(items, 1):
        data = tool_calling.run(m, q["question"], GREEDY, 0, [], True)
        rows.append(score(q, data, expected(q, count)))
        figures = {"n": len(rows), "counts": {c: sum(r[c] for r in rows) for c in COUNTS}, "rows": list(rows)}
        progress(f"{i}/{len(items)}: " + ", ".join(f"{c} {figures['counts'][c]}" for c in COUNTS), figures)
    return figures


def main(argv: list[str] | None = None) -> None:
    from playground.analysis import models, tool_calling

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions")
    parser.add_argument("--out", default=str(tool_calling.RESULTS), help="where to write the results")
    args = parser.parse_args(argv)
    items = questions()[:args.limit]
    command = "python -m playground.tools.tool_calls " + " ".join(sys.argv[1:] if argv is None else argv)
    start = time.perf_counter()

    def write(text: str, figures: dict) -> None:
        print(text, flush=True)
        result = {"model": models.SMOLLM2, "protocol": __doc__.split("\n\n", 1)[1].strip(), "decoding": "greedy",
                  "system": tool_calling.system_prompt(), "set": "assets/reasoning/tool_questions.json",
                  "set_size": len(questions()), "complete": figures["n"] == len(items), **figures,
                  "seconds": round(time.perf_counter() - start, 1), "command": command.strip()}
        write_results(args.out, result)

    evaluate(models.get(models.SMOLLM2), items, write)


if __name__ == "__main__":
    main()
