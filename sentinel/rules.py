"""Detection rules as data files: ``rules/<rule id>.toml`` holds metadata, SQL and test cases.

A rule file names its title template, severity, description, MITRE ATT&CK ids, runbook, dedupe
key template, window and SQL; ``[[cases]]`` beside them give events and the *whole* findings they
must produce. Loading collects every problem with file and line instead of stopping at the first.
The SQL contract (tables and columns a rule may use and must return) is in docs/detect.md.
"""

from __future__ import annotations

import datetime as dt
import re
import string
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentinel.config import SEVERITIES
from sentinel.errors import Problem, SentinelError
from sentinel.timeutil import parse_duration

RULE_ID = re.compile(r"^[a-z]+\.[a-z0-9_]+$")
# The SQL rules in rules/; their ids are contract (design section 4). The leak scanner's
# logs.secret_leak and logs.prompt_leak are produced by sentinel.scan, not by rule files.
CONTRACT_RULE_IDS = frozenset(
    {
        "weights.non_hydrator_read",
        "weights.denied_read",
        "weights.bytes_read_anomaly",
        "weights.first_seen_reader",
        "weights.cross_tenant_read",
        "weights.full_model_copy",
        "weights.hydrator_off_platform",
        "weights.promoted_checkpoint_delete",
        "weights.protection_tampering",
        "pipeline.source_silent",
    }
)
MITRE_ID = re.compile(r"^(T\d{4}(\.\d{3})?|TA\d{4})$")
SCOPES = ("events", "always")
STATES = ("read_hourly", "seen_readers", "event_freshness")
# Finding columns a rule's SQL returns; every other column becomes a key of the evidence.
REQUIRED_COLUMNS = (
    "window_start",
    "actor",
    "bucket",
    "first_seen",
    "last_seen",
    "event_count",
    "bytes",
)
FINDING_COLUMNS = (
    *REQUIRED_COLUMNS,
    "provider",
    "account",
    "object_key",
    "model",
    "tenant",
    "severity",
    "summary",
)
DERIVED_FIELDS = ("actor_label", "bytes_h", "rule_id")
# What an expected finding in a case must state: the whole finding, not just "it fired".
EXPECTED_REQUIRED = ("severity", "title", "dedupe_key", "event_count", "bytes")
EXPECTED_KEYS = (
    *EXPECTED_REQUIRED,
    "actor",
    "bucket",
    "object_key",
    "model",
    "tenant",
    "provider",
    "account",
    "status",
    "first_seen",
    "last_seen",
    "evidence",
)
_KEYS = {
    "id": str,
    "title": str,
    "severity": str,
    "description": str,
    "mitre": list,
    "runbook": str,
    "dedupe": str,
    "window": str,
    "scope": str,
    "state": list,
    "enabled": bool,
    "sql": str,
    "cases": list,
}
_REQUIRED = ("title", "severity", "description", "mitre", "runbook", "dedupe", "window", "sql")
_CASE_KEYS = {"name", "events", "objects", "findings", "config", "now", "since", "until"}


class RuleError(SentinelError):
    """One or more rule files are invalid; ``problems`` locates each one."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(
            f"{len(problems)} problem(s) in rules:\n{lines}", hint="sentinel rules lint"
        )


@dataclass(frozen=True)
class Case:
    name: str
    events: tuple[dict[str, Any], ...]
    objects: tuple[dict[str, Any], ...]
    findings: tuple[dict[str, Any], ...]
    config: str = ""
    now: str = ""
    since: str = ""
    until: str = ""
    line: int | None = None

    @property
    def positive(self) -> bool:
        return bool(self.findings)


@dataclass(frozen=True)
class Rule:
    id: str
    path: str
    title: str
    severity: str
    description: str
    mitre: tuple[str, ...]
    runbook: str
    dedupe: str
    window: dt.timedelta | None  # None: one finding per dedupe key, ever
    sql: str
    scope: str = "events"
    state: tuple[str, ...] = ()
    enabled: bool = True
    cases: tuple[Case, ...] = ()
    lines: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def line(self, key: str) -> int | None:
        return self.lines.get(key)

    def template_fields(self) -> set[str]:
        return _fields(self.title) | _fields(self.dedupe)


def default_rules_dir() -> Path:
    """``rules/`` of the checkout this package runs from."""
    return Path(__file__).resolve().parent.parent / "rules"


def rule_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.toml") if not p.name.startswith("_"))


def load_dir(directory: Path, *, keep_invalid: bool = False) -> tuple[list[Rule], list[Problem]]:
    """Every valid rule in ``directory`` (with ``keep_invalid``, also those with non-fatal
    problems, for lint), plus every problem found."""
    if not directory.is_dir():
        return [], [Problem(str(directory), None, "rules directory not found")]
    rules: list[Rule] = []
    problems: list[Problem] = []
    for path in rule_files(directory):
        rule, found = load_file(path)
        problems.extend(found)
        if rule is not None and (keep_invalid or not found):
            rules.append(rule)
    return rules, problems


def load_file(path: Path) -> tuple[Rule | None, list[Problem]]:
    """Parse one rule file; structural problems are returned, not raised."""
    text = path.read_text(encoding="utf-8")
    where = str(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        return None, [Problem(where, int(match.group(1)) if match else None, str(exc))]
    lines = _key_lines(text)
    problems: list[Problem] = []

    def problem(key: str, message: str) -> None:
        problems.append(Problem(where, lines.get(key), message))

    rule_id = path.stem
    if not RULE_ID.match(rule_id):
        problem("", f"file name {path.name!r} is not a rule id like 'weights.some_rule.toml'")
    if data.get("id", rule_id) != rule_id:
        problem("id", f"id {data['id']!r} differs from the file name ({rule_id!r})")
    if not _check_shape(data, problem):
        return None, problems
    _check_values(data, problem)
    window = _window(data["window"], lambda m: problem("window", m))
    scope = data.get("scope", "events")
    state = tuple(data.get("state", ()))
    cases = tuple(_case(c, i, lines, where, problems) for i, c in enumerate(data.get("cases", [])))
    rule = Rule(
        id=rule_id,
        path=where,
        title=data["title"],
        severity=data["severity"],
        description=data["description"].strip(),
        mitre=tuple(data["mitre"]),
        runbook=data["runbook"].strip(),
        dedupe=data["dedupe"],
        window=window,
        sql=data["sql"],
        scope=scope,
        state=state,
        enabled=data.get("enabled", True),
        cases=cases,
        lines=lines,
    )
    return rule, problems


def _check_shape(data: dict[str, Any], problem: Any) -> bool:
    """Known keys of the right types, required ones present; False when the rule cannot load."""
    ok = True
    for key, value in data.items():
        if key not in _KEYS:
            problem(key, f"unknown key {key!r}")
        elif not isinstance(value, _KEYS[key]):
            problem(key, f"{key}: expected {_KEYS[key].__name__}, got {type(value).__name__}")
            ok = False
    for key in _REQUIRED:
        if key not in data:
            problem("", f"required key {key!r} is missing")
            ok = False
    return ok


def _check_values(data: dict[str, Any], problem: Any) -> None:
    if data["severity"] not in SEVERITIES:
        problem("severity", f"severity must be one of {', '.join(SEVERITIES)}")
    for item in data["mitre"]:
        if not isinstance(item, str) or not MITRE_ID.match(item):
            problem("mitre", f"mitre: {item!r} is not an ATT&CK id like T1530")
    if data.get("scope", "events") not in SCOPES:
        problem("scope", f"scope must be one of {', '.join(SCOPES)}")
    for item in data.get("state", ()):
        if item not in STATES:
            problem("state", f"unknown state {item!r} (known: {', '.join(STATES)})")
    for key in ("title", "dedupe"):
        try:
            _fields(data[key])
        except ValueError as exc:
            problem(key, f"{key}: bad template: {exc}")


def _window(text: str, report: Any) -> dt.timedelta | None:
    if text == "none":
        return None
    try:
        value = parse_duration(text)
    except SentinelError:
        report(f"window {text!r}: use a duration like 1h or 24h, or 'none'")
        return None
    seconds = int(value.total_seconds())
    if seconds < 3600 or seconds % 3600 or (86400 % seconds and seconds % 86400):
        report(f"window {text!r}: must be whole hours dividing a day, or whole days")
    return value


def _case(
    data: Any, index: int, lines: dict[str, int], where: str, problems: list[Problem]
) -> Case:
    line = lines.get(f"cases.{index}")
    if not isinstance(data, dict):
        problems.append(Problem(where, line, f"case {index + 1}: expected a table"))
        return Case(f"case {index + 1}", (), (), (), line=line)
    name = str(data.get("name", f"case {index + 1}"))
    for key in data:
        if key not in _CASE_KEYS:
            problems.append(Problem(where, line, f"case {name!r}: unknown key {key!r}"))
    findings = tuple(data.get("findings", ()))
    for number, expected in enumerate(findings, start=1):
        missing = [k for k in EXPECTED_REQUIRED if k not in expected]
        unknown = [k for k in expected if k not in EXPECTED_KEYS]
        if missing:
            problems.append(
                Problem(where, line, f"case {name!r} finding {number}: missing {missing}")
            )
        if unknown:
            problems.append(
                Problem(where, line, f"case {name!r} finding {number}: unknown keys {unknown}")
            )
    return Case(
        name=name,
        events=tuple(data.get("events", ())),
        objects=tuple(data.get("objects", ())),
        findings=findings,
        config=str(data.get("config", "")),
        now=str(data.get("now", "")),
        since=str(data.get("since", "")),
        until=str(data.get("until", "")),
        line=line,
    )


def _fields(template: str) -> set[str]:
    names = set()
    for _, name, _, _ in string.Formatter().parse(template):
        if name is not None:
            if not name.isidentifier():
                raise ValueError(f"field {{{name}}} must be a plain column name")
            names.add(name)
    return names


def _key_lines(text: str) -> dict[str, int]:
    """Line of each top-level key and of each ``[[cases]]`` table (``cases.0``, ...)."""
    lines: dict[str, int] = {}
    in_cases = False
    count = 0
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped == "[[cases]]":
            lines[f"cases.{count}"] = number
            count += 1
            in_cases = True
            continue
        if stripped.startswith("["):
            lines.setdefault(stripped.strip("[]").strip(), number)
            in_cases = in_cases or stripped.startswith("[[cases.")
            continue
        match = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=", line)
        if match and not in_cases:
            lines.setdefault(match.group(1), number)
    return lines


def lint(directory: Path, cfg: Any = None) -> tuple[list[Rule], list[Problem]]:
    """Load every rule and check what loading cannot: the SQL binds against the real schema
    and returns the finding columns, templates name real columns, and cases exist both ways."""
    from sentinel.config import Config
    from sentinel.detect import install_context
    from sentinel.store import Store
    from sentinel.testing import event_rows
    from sentinel.timeutil import utcnow

    rules, problems = load_dir(directory, keep_invalid=True)
    with Store.open(":memory:") as store:
        install_context(store, cfg or Config(), utcnow())
        for rule in rules:
            problems.extend(_lint_rule(store, rule, event_rows))
    return rules, problems


def _lint_rule(store: Any, rule: Rule, event_rows: Any) -> list[Problem]:
    problems: list[Problem] = []

    def problem(key: str, message: str, offset: int = 0) -> None:
        line = rule.line(key)
        problems.append(Problem(rule.path, line + offset if line else None, message))

    try:
        columns = [row["column_name"] for row in store.query(f"DESCRIBE {rule.sql}")]
    except SentinelError as exc:
        match = re.search(r"LINE (\d+):", exc.message)
        problem(
            "sql",
            f"sql does not run: {exc.message.splitlines()[0]}",
            int(match.group(1)) if match else 0,
        )
        columns = []
    if columns:
        missing = [c for c in REQUIRED_COLUMNS if c not in columns]
        if missing:
            problem("sql", f"sql must return column(s) {', '.join(missing)}")
        for key, template in (("title", rule.title), ("dedupe", rule.dedupe)):
            unknown = _fields(template) - set(columns) - set(DERIVED_FIELDS)
            if unknown:
                problem(key, f"{key} names {sorted(unknown)}, which the sql does not return")
    if not any(c.positive for c in rule.cases):
        problem("", "needs at least one case that expects findings")
    if not any(not c.positive for c in rule.cases):
        problem("", "needs at least one case that expects no findings")
    for case in rule.cases:
        try:
            event_rows(case.events)
        except (ValueError, KeyError, SentinelError) as exc:
            problems.append(Problem(rule.path, case.line, f"case {case.name!r}: {exc}"))
    return problems
