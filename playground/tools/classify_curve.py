"""The lecture's picture as numbers: held-out accuracy against the number of labelled examples, per method.

    python -m playground.tools.classify_curve [--sizes=16,64,256,0] [--methods=lstm,bilstm,probe-cls,...]
                                              [--seeds=0,1,2] [--scratch_seeds=0] [--out assets/classify/curve.json]

Every point is one run of training/classify.py's recipe (the same as `python -m playground.train classifier`) on
`n` examples drawn evenly per class from the training split (0: all 3,500), measured on the whole held-out split
(1,000 sentences) that no run trains on or selects by; each size is run with every seed (each seed draws other
examples and starts from another initialisation; the probes take a second a run, so they get more seeds than the
runs that train a network) and the mean and each run are recorded. A base's features are computed once for its
probes (the encoder is frozen: every probe run would compute the same numbers). `--merge` keeps the curves of the
existing file that this run does not measure (a method added later is measured alone, the others kept as measured).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import torch

from playground import checkpoints
from playground.nets.classifier import METHODS, ClassifierConfig, base_encoder, init_head
from playground.training import classify as tc

OUT = checkpoints.ROOT / "assets" / "classify" / "curve.json"


def probe_points(data: dict, sizes: list[int], seeds: list[int], cfg: tc.ClassifyTrainConfig,
                 methods: list[str]) -> dict:
    """Accuracy of the [CLS] and mean probes of one base (`methods`: probe-cls and/or probe-mean, or their bert-
    forms) for every size and seed, on features computed once."""
    encoder, _, tok = base_encoder(ClassifierConfig(method=methods[0]).base)
    classes = list(dict.fromkeys(e["label"] for e in data["train"]))
    feats = {split: tc.features(encoder, tok, [e["text"] for e in data[split]], cfg.max_len) for split in data}
    gold = {split: torch.tensor([classes.index(e["label"]) for e in data[split]]) for split in data}
    index = {id(e): i for i, e in enumerate(data["train"])}
    points: dict[str, list] = {method: [] for method in methods}
    for method in methods:
        which = 1 if method.endswith("mean") else 0
        steps, lr, _ = tc.DEFAULTS[method]
        for n in sizes:
            runs = []
            for seed in seeds:
                rows = [index[id(e)] for e in tc.draw(data["train"], n, seed)]
                head = init_head(torch.nn.Linear(encoder.config.n_embd, len(classes)),
                                 torch.Generator().manual_seed(seed))
                tc.train_head(head, feats["train"][which][rows], gold["train"][rows], steps, lr, cfg.weight_decay)
                with torch.no_grad():
                    runs.append(tc.evaluate(head(feats["held_out"][which]), gold["held_out"])["accuracy"])
            points[method].append(_point(n, len(data["train"]), runs, seeds))
            print(method, points[method][-1], flush=True)
    return points


def _point(n: int, total: int, runs: list[float], seeds: list[int]) -> dict:
    return {"n": n or total, "accuracy": round(sum(runs) / len(runs), 4), "runs": runs, "seeds": seeds}


def run_points(method: str, data: dict, sizes: list[int], seeds: list[int]) -> list[dict]:
    points = []
    for n in sizes:
        runs = [tc.run(method, tc.ClassifyTrainConfig(n_train=n), seed, data)["held_out"]["accuracy"] for seed in seeds]
        points.append(_point(n, len(data["train"]), runs, seeds))
        print(method, points[-1], flush=True)
    return points


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="16,64,256,0")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--seeds", default="0,1,2", help="the probes' seeds (a probe run takes a second)")
    parser.add_argument("--scratch_seeds", default="0",
                        help="the seeds of the runs that train a network: LSTMs, LoRA, fine-tuning (minutes each)")
    parser.add_argument("--merge", action="store_true", help="keep the out file's curves this run does not measure")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    methods = [m.strip() for m in args.methods.split(",")]
    started = time.perf_counter()
    data = tc.load_examples()
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        parser.error(f"no method {', '.join(unknown)}; the methods: {', '.join(METHODS)}")
    before = json.loads(args.out.read_text(encoding="utf-8")) if args.merge and args.out.is_file() else {}
    curves: dict[str, list] = dict(before.get("curves", {}))
    for base in ("", "bert-"):
        probes = [m for m in (f"{base}probe-cls", f"{base}probe-mean") if m in methods]
        if probes:
            curves.update(probe_points(data, sizes, seeds, tc.ClassifyTrainConfig(), probes))
    for method in methods:
        if "probe" not in method:
            curves[method] = run_points(method, data, sizes, [int(x) for x in args.scratch_seeds.split(",")])
    curves = {m: curves[m] for m in METHODS if m in curves}      # in METHODS' order, whatever was measured when
    result = {"protocol": "held-out accuracy over the whole held-out split of assets/classify (1,000 sentences, "
                          "200 per class, never trained on); n labelled training examples drawn evenly per class; "
                          "each point the mean of one run per seed; the recipe of each method is "
                          "training/classify.py's defaults (DEFAULTS)",
              "chance": round(1 / len({e['label'] for e in data['train']}), 4),
              "recipes": {m: dict(zip(("steps", "lr", "batch_size"), tc.DEFAULTS[m])) for m in curves},
              "curves": curves, "seconds": round(time.perf_counter() - started, 1),
              "command": "python -m playground.tools.classify_curve " + shlex.join(argv if argv else sys.argv[1:])}
    if before:      # what each earlier run measured, and how long it took
        result["earlier"] = before.get("earlier", []) + [{k: before[k] for k in ("command", "seconds") if k in before}]
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
