"""``sentinel.toml`` into frozen dataclasses.

Every section is a dataclass; the loader walks the dataclass fields, so adding a key is adding a
field (and a line in ``sentinel.example.toml``, which a test checks). Unknown keys are errors with
"did you mean", every problem is collected before raising, and secrets are only ever references
(``{ env = "NAME" }``) resolved against the environment passed in.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from sentinel.errors import ConfigError, Problem

_LOOPBACK_HTTP = re.compile(r"^http://(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?(/|$)")
SEVERITIES = ("info", "low", "medium", "high", "critical")
Severity = Literal["info", "low", "medium", "high", "critical"]


@dataclass(frozen=True)
class SecretRef:
    """A secret named by reference; the value never appears in config files or logs."""

    env: str

    def resolve(self, environ: Mapping[str, str]) -> str:
        value = environ.get(self.env)
        if not value:
            raise ConfigError(
                [Problem("environment", None, f"secret variable {self.env} is not set")],
                hint=f"export {self.env}=... (or set it from a Kubernetes Secret)",
            )
        return value

    def __repr__(self) -> str:
        return f"SecretRef(env={self.env!r})"


@dataclass(frozen=True)
class StoreConfig:
    path: str = "sentinel.duckdb"
    keep_raw: Literal["all", "non_read", "none"] = "non_read"
    memory_limit: str = "1GB"
    threads: int = 2


@dataclass(frozen=True)
class CloudTrailSource:
    name: str = ""
    bucket: str = ""
    prefix: str = ""
    path: str = ""
    accounts: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()
    org_id: str = ""
    endpoint_url: str = ""
    lookback_days: int = 2
    batch_files: int = 256

    @property
    def label(self) -> str:
        return self.name or (f"s3://{self.bucket}/{self.prefix}" if self.bucket else self.path)


@dataclass(frozen=True)
class GcsAuditSource:
    name: str = ""
    projects: tuple[str, ...] = ()
    buckets: tuple[str, ...] = ()
    path: str = ""
    api_endpoint: str = ""
    credentials: Literal["default", "anonymous"] = "default"
    requests_per_minute: int = 60
    lag_minutes: int = 5
    window_minutes: int = 60
    start: str = ""

    @property
    def label(self) -> str:
        return self.name or (",".join(self.projects) if self.projects else self.path)


@dataclass(frozen=True)
class LokiSource:
    name: str = ""
    url: str = ""
    tenant: str = ""
    selector: str = ""
    token: SecretRef | None = None
    username: str = ""
    password: SecretRef | None = None
    prompt_detection: bool = False
    lag_seconds: int = 120
    overlap_seconds: int = 3600
    window_seconds: int = 3600
    limit: int = 5000
    start: str = ""
    line_filter: bool = True
    delete_url: str = ""
    timeout_seconds: float = 30.0
    max_attempts: int = 6

    @property
    def label(self) -> str:
        return self.name or f"{self.url}#{self.tenant}"


@dataclass(frozen=True)
class SourcesConfig:
    cloudtrail: tuple[CloudTrailSource, ...] = ()
    gcs_audit: tuple[GcsAuditSource, ...] = ()
    loki: tuple[LokiSource, ...] = ()


@dataclass(frozen=True)
class WatchConfig:
    buckets: tuple[str, ...] = ()
    # One model = the key prefix matched by "bucket/glob", each * one path segment
    # (e.g. "acme-weights-prod/models/*/*"). Unmatched keys: the first two segments.
    models: tuple[str, ...] = ()


@dataclass(frozen=True)
class HydratorsConfig:
    actors: tuple[str, ...] = ()
    networks: tuple[str, ...] = ()


@dataclass(frozen=True)
class Tenant:
    name: str
    actors: tuple[str, ...] = ()
    models: tuple[str, ...] = ()


@dataclass(frozen=True)
class PromotedConfig:
    patterns: tuple[str, ...] = ()


@dataclass(frozen=True)
class Webhook:
    """One ``[[alerts.webhook]]`` destination; ``format`` picks the payload module."""

    url: str
    name: str = ""
    format: Literal["json", "ocsf", "splunk_hec", "alertmanager"] = "json"
    secret: tuple[SecretRef, ...] = ()
    token: SecretRef | None = None
    min_severity: Severity = "low"
    rules: tuple[str, ...] = ("*",)
    allow_insecure: bool = False
    timeout_seconds: float = 10.0
    max_attempts: int = 30
    max_age_hours: float = 48.0
    backoff_base_seconds: float = 5.0
    backoff_cap_seconds: float = 3600.0
    max_payload_bytes: int = 512 * 1024
    batch_size: int = 50
    finding_url: str = ""
    splunk_index: str = ""
    splunk_source: str = "sentinel"
    splunk_sourcetype: str = "sentinel:finding"
    splunk_ack_channel: str = ""
    splunk_ack_timeout_seconds: float = 10.0
    alert_ttl_minutes: float = 60.0

    @property
    def label(self) -> str:
        return self.name or self.url

    @property
    def transport_allowed(self) -> bool:
        """HTTPS, plain HTTP to loopback, or plain HTTP explicitly allowed."""
        return (
            self.url.startswith("https://")
            or self.allow_insecure
            or _LOOPBACK_HTTP.match(self.url) is not None
        )


@dataclass(frozen=True)
class AlertsConfig:
    webhook: tuple[Webhook, ...] = ()
    # A finding is re-sent when its event_count or bytes crosses one of these steps.
    count_steps: tuple[int, ...] = (10, 100, 1000, 10000, 100000)
    bytes_steps: tuple[int, ...] = (1024**3, 10 * 1024**3, 100 * 1024**3, 1024**4)


@dataclass(frozen=True)
class Suppression:
    rule: str
    reason: str
    actor: str = "*"
    bucket: str = "*"
    expires: str = ""


@dataclass(frozen=True)
class DetectConfig:
    disabled_rules: tuple[str, ...] = ()
    baseline_days: int = 28
    anomaly_k: float = 6.0
    anomaly_floor_bytes: int = 10 * 1024**3
    anomaly_median_multiple: float = 3.0
    anomaly_min_history_days: int = 7
    full_copy_share: float = 0.8
    full_copy_window_hours: int = 24
    full_copy_hydrators: bool = True
    silent_after_hours: float = 6.0
    lookback_hours: int = 48
    rules_dir: str = ""
    denied_window_hours: int = 1
    first_seen_learning_days: float = 7.0
    anomaly_history_days: int = 21
    anomaly_p99_multiple: float = 3.0
    anomaly_peak_multiple: float = 1.0


@dataclass(frozen=True)
class SeverityOverride:
    detector: str
    severity: Severity


@dataclass(frozen=True)
class ScanConfig:
    fingerprint_key: SecretRef | None = None
    canaries: tuple[str, ...] = ()
    disabled_detectors: tuple[str, ...] = ()
    allow_fingerprints: tuple[str, ...] = ()
    severity: tuple[SeverityOverride, ...] = ()


@dataclass(frozen=True)
class MetricsConfig:
    """Jobs, the scheduler and Sentinel's own metrics (see sentinel.example.toml)."""

    jobs_dir: str = "jobs"
    lock_wait_seconds: float = 60.0
    textfile_dir: str = ""
    pushgateway: str = ""
    listen: str = "127.0.0.1:9464"
    advertise: str = ""
    sd_token: SecretRef | None = None
    misfire_grace_seconds: float = 300.0


@dataclass(frozen=True)
class Config:
    store: StoreConfig = field(default_factory=StoreConfig)
    sources: SourcesConfig = field(default_factory=SourcesConfig)
    watch: WatchConfig = field(default_factory=WatchConfig)
    hydrators: HydratorsConfig = field(default_factory=HydratorsConfig)
    tenants: tuple[Tenant, ...] = ()
    promoted: PromotedConfig = field(default_factory=PromotedConfig)
    alerts: AlertsConfig = field(default_factory=AlertsConfig)
    suppressions: tuple[Suppression, ...] = ()
    detect: DetectConfig = field(default_factory=DetectConfig)
    scan: ScanConfig = field(default_factory=ScanConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    # Where the file was found (empty: built-in defaults) and the environment secrets resolve in.
    origin: str = field(default="", compare=False)
    environ: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def secret(self, ref: SecretRef) -> str:
        return ref.resolve(self.environ)


_INTERNAL_FIELDS = {"origin", "environ"}


def find_config_path(explicit: str | None, environ: Mapping[str, str]) -> Path | None:
    """``--config``, then ``$SENTINEL_CONFIG``, then ``./sentinel.toml``; None means defaults."""
    if explicit:
        return Path(explicit)
    if environ.get("SENTINEL_CONFIG"):
        return Path(environ["SENTINEL_CONFIG"])
    local = Path("sentinel.toml")
    return local if local.exists() else None


def load(path: Path | None, environ: Mapping[str, str] | None = None) -> Config:
    """Read and validate a config file; ``None`` gives the embedded defaults."""
    env = dict(os.environ if environ is None else environ)
    if path is None:
        return Config(environ=env)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            [Problem(str(path), None, f"cannot read: {exc.strerror}")],
            hint="pass --config PATH or set SENTINEL_CONFIG",
        ) from exc
    return loads(text, origin=str(path), environ=env)


def loads(
    text: str, *, origin: str = "<string>", environ: Mapping[str, str] | None = None
) -> Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([Problem(origin, _toml_error_line(exc), str(exc))]) from exc
    parser = _Parser(origin, _KeyLines(text))
    values = parser.build(Config, data, ())
    parser.check_semantics(values)
    if parser.problems:
        raise ConfigError(parser.problems, hint="see sentinel.example.toml for every key")
    return Config(**values, origin=origin, environ=dict(environ or {}))


def _toml_error_line(exc: tomllib.TOMLDecodeError) -> int | None:
    match = re.search(r"line (\d+)", str(exc))
    return int(match.group(1)) if match else None


class _KeyLines:
    """Maps dotted key paths (with array indexes) to the line that defines them.

    tomllib keeps no positions, so a light scan of table headers and ``key =`` lines is enough
    to point a reader at the right line.
    """

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\"]+)\s*\]\]?")
    _KEY = re.compile(r"^\s*([A-Za-z0-9_\-\"]+)\s*=")

    def __init__(self, text: str) -> None:
        self.lines: dict[tuple[str, ...], int] = {}
        counts: dict[tuple[str, ...], int] = {}
        table: tuple[str, ...] = ()
        for number, line in enumerate(text.splitlines(), start=1):
            header = self._HEADER.match(line)
            if header:
                parts = tuple(p.strip('"') for p in header.group(2).split("."))
                if header.group(1) == "[[":
                    index = counts.get(parts, 0)
                    counts[parts] = index + 1
                    table = (*parts, str(index))
                else:
                    table = parts
                self.lines.setdefault(table, number)
                continue
            key = self._KEY.match(line)
            if key:
                self.lines.setdefault((*table, key.group(1).strip('"')), number)

    def line(self, path: tuple[str, ...]) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None


class _Parser:
    def __init__(self, origin: str, key_lines: _KeyLines) -> None:
        self.origin = origin
        self.key_lines = key_lines
        self.problems: list[Problem] = []

    def problem(self, path: tuple[str, ...], message: str) -> None:
        dotted = ".".join(p for p in path if not p.isdigit()) or "(top level)"
        self.problems.append(
            Problem(self.origin, self.key_lines.line(path), f"{dotted}: {message}")
        )

    def build(self, cls: type, data: Any, path: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(data, dict):
            self.problem(path, f"expected a table, got {type(data).__name__}")
            return {}
        hints = typing.get_type_hints(cls)
        known = [f for f in fields(cls) if f.name not in _INTERNAL_FIELDS]
        names = {f.name for f in known}
        for key in data:
            if key not in names:
                close = difflib.get_close_matches(key, names, n=1)
                suggestion = f" (did you mean {close[0]!r}?)" if close else ""
                self.problem((*path, key), f"unknown key{suggestion}")
        values: dict[str, Any] = {}
        for f in known:
            if f.name in data:
                values[f.name] = self.convert(hints[f.name], data[f.name], (*path, f.name))
            elif f.default is MISSING and f.default_factory is MISSING:
                self.problem((*path, f.name), "required key is missing")
                values[f.name] = None
        return values

    def convert(self, tp: Any, value: Any, path: tuple[str, ...]) -> Any:
        origin = get_origin(tp)
        args = get_args(tp)
        if origin in (typing.Union, types.UnionType):
            inner = [a for a in args if a is not type(None)]
            return self.convert(inner[0], value, path)
        if origin is tuple:
            item_type = args[0]
            if item_type is SecretRef and isinstance(value, dict | str):
                value = [value]  # one secret where a list of them (rotation) is allowed
            if not isinstance(value, list):
                self.problem(path, f"expected a list, got {type(value).__name__}")
                return ()
            return tuple(self.convert(item_type, v, (*path, str(i))) for i, v in enumerate(value))
        if origin is Literal:
            if value not in args:
                choices = ", ".join(repr(a) for a in args)
                self.problem(path, f"must be one of {choices}, got {value!r}")
            return value
        if tp is SecretRef:
            return self.secret_ref(value, path)
        if is_dataclass(tp) and isinstance(tp, type):
            built = self.build(tp, value, path)
            try:
                return tp(**built)
            except TypeError:
                return None  # a required key was missing; already reported
        return self.scalar(tp, value, path)

    def secret_ref(self, value: Any, path: tuple[str, ...]) -> SecretRef | None:
        if isinstance(value, dict) and set(value) == {"env"} and isinstance(value["env"], str):
            return SecretRef(env=value["env"])
        self.problem(path, 'secrets must be references like { env = "NAME" }, never literals')
        return None

    def scalar(self, tp: Any, value: Any, path: tuple[str, ...]) -> Any:
        if tp is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if tp is int and isinstance(value, bool):
            self.problem(path, "expected an integer, got a boolean")
            return value
        if not isinstance(value, tp):
            self.problem(path, f"expected {tp.__name__}, got {type(value).__name__}")
        return value

    def check_semantics(self, values: dict[str, Any]) -> None:
        """Rules that span keys: things a type alone cannot say."""
        sources = values.get("sources")
        if isinstance(sources, SourcesConfig):
            for i, ct in enumerate(sources.cloudtrail):
                if ct is not None and bool(ct.bucket) == bool(ct.path):
                    self.problem(
                        ("sources", "cloudtrail", str(i)),
                        "set exactly one of 'bucket' (S3) or 'path' (local directory)",
                    )
            for i, lk in enumerate(sources.loki):
                if lk is not None and not lk.url:
                    self.problem(("sources", "loki", str(i), "url"), "a Loki source needs a url")
                if lk is not None and not 1 <= lk.limit <= 5000:
                    self.problem(("sources", "loki", str(i), "limit"), "must be 1..5000")
                if lk is not None and not 1 <= lk.window_seconds <= 3600:
                    self.problem(("sources", "loki", str(i), "window_seconds"), "must be 1..3600")
        alerts = values.get("alerts")
        if isinstance(alerts, AlertsConfig):
            self.check_webhooks(alerts.webhook)

    def check_webhooks(self, hooks: tuple[Webhook | None, ...]) -> None:
        labels: set[str] = set()
        for i, hook in enumerate(hooks):
            if hook is None:
                continue
            path = ("alerts", "webhook", str(i))
            if not hook.transport_allowed:
                self.problem(
                    (*path, "url"),
                    "must use https:// (or set allow_insecure = true for a trusted network)",
                )
            if hook.format in ("json", "ocsf") and not hook.secret:
                self.problem(
                    (*path, "secret"),
                    'a json/ocsf webhook must be signed: secret = { env = "NAME" }',
                )
            if hook.format == "splunk_hec" and hook.token is None:
                self.problem((*path, "token"), 'Splunk HEC needs token = { env = "NAME" }')
            if hook.label in labels:
                self.problem((*path, "name"), f"two destinations are both called {hook.label!r}")
            labels.add(hook.label)
            for key in ("max_attempts", "max_payload_bytes", "batch_size"):
                if getattr(hook, key) < 1:
                    self.problem((*path, key), "must be at least 1")
