"""The documentation matches the app: docs/api.md's table against the app's own API description, and every
relative link or picture in the README and docs/ points at a file that exists."""

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
