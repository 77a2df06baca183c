"""The documentation matches the app: docs/api.md's table against the app's own API description, every relative
link or picture in the README and docs/ points at a file that exists, and the accessibility conformance report
answers every WCAG 2.1 A and AA criterion, citing tests that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"^\| `([a-z_0-9]+)` \| (.*?) \| .* \|$")
ITEM = re.compile(r"^`([a-z_0-9]+)`(?: ∈ \{(.*?)\})?(?::.*)?$")


def documented_api() -> dict[str, list[tuple[str, set[str] | None]]]:
    """docs/api.md's table: per api_name, each input's name and its documented choices (None: not listed)."""
    rows = {}
    for line in (ROOT / "docs" / "api.md").read_text(encoding="utf-8").splitlines():
        if match := ROW.match(line):
            name, inputs = match.groups()
            items = [] if inputs == "none" else inputs.split("; ")
            parsed = [ITEM.match(item) for item in items]
            assert all(parsed), f"{name}: an input is not written `name` [∈ {{choices}}][: description]: {items}"
            rows[name] = [(m[1], None if m[2] is None else set(re.findall(r"`([^`]*)`", m[2]))) for m in parsed]
    return rows


def test_the_documented_api_is_the_apps_own():
    import app

    actual = app.demo.get_api_info()["named_endpoints"]
    documented = documented_api()
    assert set(documented) == {name.strip("/") for name in actual}, "docs/api.md lists other endpoints than the app"
    for name, params in actual.items():
        doc = documented[name.strip("/")]
        assert [p["parameter_name"] for p in params["parameters"]] == [d[0] for d in doc], name
        for param, (_, choices) in zip(params["parameters"], doc):
            kind = param.get("type", {})
            enum = kind.get("enum") or (kind.get("items") or {}).get("enum")
            if choices is not None:
                assert choices == {str(v) for v in enum or ()}, f"{name} {param['parameter_name']}: {enum}"


def test_every_relative_link_and_picture_exists():
    missing = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        targets = re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r'<img src="([^"]+)"', text)
        for target in targets:
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (page.parent / target.split("#")[0]).exists():
                missing.append(f"{page.relative_to(ROOT)}: {target}")
    assert not missing, missing


# WCAG 2.1's success criteria at levels A and AA (https://www.w3.org/TR/WCAG21/), by number
WCAG21_A = ("1.1.1 1.2.1 1.2.2 1.2.3 1.3.1 1.3.2 1.3.3 1.4.1 1.4.2 2.1.1 2.1.2 2.1.4 2.2.1 2.2.2 2.3.1 2.4.1 2.4.2 2.4.3 "
            "2.4.4 2.5.1 2.5.2 2.5.3 2.5.4 3.1.1 3.2.1 3.2.2 3.3.1 3.3.2 4.1.1 4.1.2").split()
WCAG21_AA = ("1.2.4 1.2.5 1.3.4 1.3.5 1.4.3 1.4.4 1.4.5 1.4.10 1.4.11 1.4.12 1.4.13 2.4.5 2.4.6 2.4.7 3.1.2 3.2.3 3.2.4 "
             "3.3.3 3.3.4 4.1.3").split()
LEVELS = {"Supports", "Partially Supports", "Does Not Support", "Not Applicable"}


def test_the_conformance_report_answers_every_a_and_aa_criterion_with_evidence_that_exists():
    text = (ROOT / "docs" / "accessibility-conformance-report.md").read_text(encoding="utf-8")
    criterion = re.compile(r"^\| (\d\.\d\.\d+) [^|]+ \| ([^|]+) \| ([^|]+) \|$", re.M)
    level_a, level_aa = (criterion.findall(table) for table in text.split("### Table 2"))
    assert [number for number, _, _ in level_a] == WCAG21_A and [number for number, _, _ in level_aa] == WCAG21_AA
    assert {level.strip() for _, level, _ in level_a + level_aa} <= LEVELS
    assert all(remark.strip() for _, _, remark in level_a + level_aa), "each criterion says what its level rests on"
    cited = set(re.findall(r"(test_[a-z_0-9]+\.py)", text))
    assert cited and all((ROOT / "tests" / name).is_file() for name in cited), cited
    assert "No screen reader has been used on the app by a person" in text


def test_the_caches_bounds_in_architecture_md_are_the_codes():
    """docs/architecture.md's table of caches gives each `lru.Bounded`'s bound as the code sets it (it once said 64
    and 96 MB where the code set 32 and 48 MB): every row read from the code, none missing."""
    from playground.analysis import attention
    from playground.serving import engine
    from playground.training import finetune
    from playground.ui import demo, fastpath, pagecache, queuepath

    code = {"ui/pagecache.py": pagecache.PAGES, "ui/queuepath.py": queuepath.MAX_BYTES,
            "ui/fastpath.py": fastpath.MAX_BYTES, "ui/cache.py": demo.ANSWER_BYTES,
            "analysis/attention.py": attention.KEPT_BYTES, "serving/engine.py": engine.PREFIX_BYTES,
            "training/finetune.py": finetune._BASE_TEXTS.max_bytes}
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = text.split("| cache | where | what it holds | bound |", 1)[1].split("\n\n", 1)[0]
    documented = {}
    for where, bound in re.findall(r"^\| [^|]+ \| `([a-z_/]+\.py)`[^|]* \| [^|]+ \| (\d+) MB \|$", table, re.M):
        documented[where] = int(bound) << 20
    assert documented == code
