"""Every rule lints and passes its own cases; lint points at file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel.rules import CONTRACT_RULE_IDS as CONTRACT_IDS
from sentinel.rules import default_rules_dir, lint, load_dir
from sentinel.testing import run_case
from tests.detect_fixtures import fresh_logs  # noqa: F401  (autouse)

RULES, _ = load_dir(default_rules_dir())


def test_every_contract_rule_exists_and_lints_clean() -> None:
    rules, problems = lint(default_rules_dir())
    assert [str(p) for p in problems] == []
    assert {r.id for r in rules} == CONTRACT_IDS


@pytest.mark.parametrize(
    ("rule", "case"),
    [(r, c) for r in RULES for c in r.cases],
    ids=[f"{r.id}:{c.name}" for r in RULES for c in r.cases],
)
def test_rule_case(rule, case) -> None:  # type: ignore[no-untyped-def]
    result = run_case(rule, case)
    assert result.passed, "\n".join(result.failures)


def test_every_expected_finding_states_the_whole_finding() -> None:
    for rule in RULES:
        for case in rule.cases:
            for finding in case.findings:
                assert {"severity", "title", "dedupe_key", "event_count", "bytes"} <= set(finding)


def test_lint_reports_every_problem_with_file_and_line(tmp_path: Path) -> None:
    source = (default_rules_dir() / "weights.denied_read.toml").read_text(encoding="utf-8")
    broken = source.replace('severity = "medium"\n', 'severity = "urgent"\nnoise = 1\n', 1)
    broken = broken.replace("count(DISTINCT object_key) AS objects", "count(DISTINCT nokey)", 1)
    (tmp_path / "weights.denied_read.toml").write_text(broken, encoding="utf-8")
    (tmp_path / "Bad-Name.toml").write_text('title = "x"\n', encoding="utf-8")
    (tmp_path / "weights.renamed.toml").write_text(source, encoding="utf-8")
    _, problems = lint(tmp_path)
    text = [str(p) for p in problems]
    where = str(tmp_path / "weights.denied_read.toml")
    assert f"{where}:3: severity must be one of info, low, medium, high, critical" in text
    assert f"{where}:4: unknown key 'noise'" in text
    sql_line = broken.splitlines().index(
        next(line for line in broken.splitlines() if "nokey" in line)
    )
    assert any(t.startswith(f"{where}:{sql_line + 1}: sql does not run") for t in text), text
    assert any("Bad-Name.toml" in t and "not a rule id" in t for t in text)
    assert any("Bad-Name.toml" in t and "'sql' is missing" in t for t in text)
    renamed = str(tmp_path / "weights.renamed.toml")
    assert (
        f"{renamed}:1: id 'weights.denied_read' differs from the file name ('weights.renamed')"
        in text
    )


def test_a_failing_case_reports_what_differs(tmp_path: Path) -> None:
    source = (default_rules_dir() / "weights.denied_read.toml").read_text(encoding="utf-8")
    (tmp_path / "weights.denied_read.toml").write_text(
        source.replace("event_count = 3\n", "event_count = 4\n", 1), encoding="utf-8"
    )
    cases_config = (default_rules_dir() / "_cases.toml").read_text(encoding="utf-8")
    (tmp_path / "_cases.toml").write_text(cases_config, encoding="utf-8")
    rules, _ = load_dir(tmp_path)
    result = run_case(rules[0], rules[0].cases[0])
    assert not result.passed
    assert result.failures == ["finding 1 event_count: want 4, got 3"]
