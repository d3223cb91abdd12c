"""`sentinel report`: one self-contained HTML file with the findings and charts."""

from __future__ import annotations

import datetime as dt
import html.parser
from pathlib import Path

from sentinel import demo


class _Collect(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.urls: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.urls += [v or "" for k, v in attrs if k in ("src", "href")]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_report_is_self_contained_and_shows_findings(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = demo.run(tmp_path / "demo", days=8, today=dt.date(2026, 3, 1))
    out = tmp_path / "report.html"
    run = cli("--config", str(result.config_path), "report", "--out", str(out), "--days", "365")
    assert run.exit_code == 0, run.stderr
    page = _Collect()
    page.feed(out.read_text(encoding="utf-8"))
    text = " ".join(page.text)
    assert "script" not in page.tags and page.urls == []  # opens offline, nothing fetched
    assert page.tags.count("svg") == 2 and "polyline" in page.tags
    assert "Non-hydrator role ds-notebook-runner read" in text
    assert "ds-notebook-runner" in text and "acme-weights-staging" in text
