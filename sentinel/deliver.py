"""Send what is due in the outbox, once, and return: no scheduler, no sleeping between retries.

``run(store, cfg)`` takes each destination's due items, renders them (``sentinel.payloads``),
signs them (``sentinel.webhooks``) and POSTs them. An item is marked delivered only after a 2xx
(and, for Splunk HEC with a channel, after the indexer acknowledged it), so a crash at any point
re-sends rather than loses. 408, 429, 5xx and network errors schedule a retry (exponential
backoff with jitter, or ``Retry-After``) and stop that destination for this run; other 4xx, an
oversized payload, or too many attempts / too old make a dead letter.

``run(store, cfg, dry_run=True)`` renders the requests it would send, changes nothing and sends
nothing (the lead's demo prints ``report.rendered``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from sentinel import http, logs, outbox, payloads, webhooks
from sentinel.config import Config, Webhook
from sentinel.errors import ConfigError, Problem
from sentinel.findings import utc_naive
from sentinel.outbox import Item
from sentinel.payloads import Record
from sentinel.store import Store

log = logs.get(__name__)


@dataclass
class Rendered:
    """One request as it would be sent (dry run); the Authorization value is hidden."""

    destination: str
    url: str
    delivery_ids: list[str]
    headers: dict[str, str]
    body: str


@dataclass
class Tally:
    destination: str
    sent: int = 0
    retrying: int = 0
    dead: int = 0
    deferred: int = 0


@dataclass
class Report:
    tallies: list[Tally] = field(default_factory=list)
    rendered: list[Rendered] = field(default_factory=list)
    orphaned: int = 0
    refreshed: int = 0

    @property
    def failed(self) -> bool:
        """True when some delivery failed or was dead-lettered in this run (exit 3)."""
        return self.orphaned > 0 or any(t.retrying or t.dead for t in self.tallies)


@dataclass
class _Attempt:
    ok: bool
    retryable: bool = False
    status: int | None = None
    error: str = ""
    response: str = ""
    retry_after: float | None = None


def run(
    store: Store,
    cfg: Config,
    *,
    now: dt.datetime | None = None,
    dry_run: bool = False,
    destination: str | None = None,
    limit: int = 1000,
    sleep: Callable[[float], None] = time.sleep,
) -> Report:
    """Deliver every due outbox item (or, with ``dry_run``, render them without sending)."""
    stamp = utc_naive(now or dt.datetime.now(dt.UTC))
    hooks = [h for h in cfg.alerts.webhook if destination in (None, h.label)]
    if destination and not hooks:
        raise ConfigError([Problem(cfg.origin or "config", None, f"no destination {destination}")])
    report = Report()
    if not dry_run:
        with store.transaction():
            report.refreshed = outbox.enqueue_refreshes(store, cfg, stamp)
            if destination is None:
                report.orphaned = outbox.bury_orphans(store, cfg, stamp)
    for hook in hooks:
        check_url(hook)
        items = outbox.due(store, hook.label, stamp, limit)
        if dry_run:
            report.rendered.extend(_render_only(cfg, hook, items, stamp))
        else:
            report.tallies.append(_deliver(store, cfg, hook, items, now=stamp, sleep=sleep))
    log.info(
        "deliver.run_done",
        dry_run=dry_run,
        sent=sum(t.sent for t in report.tallies),
        retrying=sum(t.retrying for t in report.tallies),
        dead=sum(t.dead for t in report.tallies) + report.orphaned,
        refreshed=report.refreshed,
    )
    return report


def check_url(hook: Webhook) -> None:
    if hook.transport_allowed:
        return
    raise ConfigError(
        [Problem("alerts.webhook", None, f"{hook.label}: must use https://")],
        hint="set allow_insecure = true only for a trusted network",
    )


def _batches(hook: Webhook, items: list[Item]) -> list[list[Item]]:
    size = payloads.module(hook.format).batch_size(hook)
    return [items[i : i + size] for i in range(0, len(items), size)]


def _body(hook: Webhook, items: list[Item], now: dt.datetime) -> bytes | None:
    """The rendered body, evidence trimmed if needed; None when even that exceeds the cap."""
    module = payloads.module(hook.format)
    utc = dt.UTC
    records = [
        Record(i.delivery_id, i.change, i.snapshot, i.created_at.replace(tzinfo=utc)) for i in items
    ]
    body: bytes = module.render(records, hook, now.replace(tzinfo=utc))
    if len(body) > hook.max_payload_bytes:
        trimmed = [payloads.trimmed(r) for r in records]
        body = module.render(trimmed, hook, now.replace(tzinfo=utc))
    return body if len(body) <= hook.max_payload_bytes else None


def _fit(
    hook: Webhook, items: list[Item], now: dt.datetime
) -> list[tuple[list[Item], bytes | None]]:
    """Split a batch until each request fits the payload cap; single misfits get None."""
    body = _body(hook, items, now)
    if body is not None or len(items) == 1:
        return [(items, body)]
    half = len(items) // 2
    return _fit(hook, items[:half], now) + _fit(hook, items[half:], now)


def message_id(items: list[Item]) -> str:
    """The webhook-id: the delivery id, or for a batch a hash of its delivery ids."""
    if len(items) == 1:
        return items[0].delivery_id
    joined = ",".join(sorted(i.delivery_id for i in items))
    return "batch_" + hashlib.sha256(joined.encode()).hexdigest()[:32]


def headers(cfg: Config, hook: Webhook, items: list[Item], body: bytes) -> dict[str, str]:
    result = {"Content-Type": payloads.module(hook.format).CONTENT_TYPE}
    if hook.token is not None:
        scheme = "Splunk" if hook.format == "splunk_hec" else "Bearer"
        result["Authorization"] = f"{scheme} {cfg.secret(hook.token)}"
    if hook.format == "splunk_hec" and hook.splunk_ack_channel:
        result["X-Splunk-Request-Channel"] = hook.splunk_ack_channel
    if hook.secret:
        secrets = [cfg.secret(ref) for ref in hook.secret]
        try:
            result.update(webhooks.sign(secrets, message_id(items), body, int(time.time())))
        except ValueError as exc:
            raise ConfigError([Problem("alerts.webhook", None, f"{hook.label}: {exc}")]) from exc
    return result


def _render_only(cfg: Config, hook: Webhook, items: list[Item], now: dt.datetime) -> list[Rendered]:
    shown = []
    for batch in _batches(hook, items):
        for part, body in _fit(hook, batch, now):
            text = body or b"(payload exceeds max_payload_bytes: would be dead-lettered)"
            try:
                heads = headers(cfg, hook, part, text)
            except ConfigError:  # a dry run works without the secrets in the environment
                heads = {"Content-Type": payloads.module(hook.format).CONTENT_TYPE}
            if "Authorization" in heads:
                heads["Authorization"] = heads["Authorization"].split(" ")[0] + " ***"
            ids = [i.delivery_id for i in part]
            shown.append(Rendered(hook.label, hook.url, ids, heads, text.decode()))
    return shown


def _deliver(
    store: Store,
    cfg: Config,
    hook: Webhook,
    items: list[Item],
    *,
    now: dt.datetime,
    sleep: Callable[[float], None],
) -> Tally:
    tally = Tally(hook.label)
    requests = [part for batch in _batches(hook, items) for part in _fit(hook, batch, now)]
    with http.client(timeout=hook.timeout_seconds) as client:
        for index, (part, body) in enumerate(requests):
            if body is None:
                too_big = f"payload exceeds max_payload_bytes ({hook.max_payload_bytes})"
                outbox.failed(store, part, hook, now, retryable=False, status=None, error=too_big)
                tally.dead += len(part)
                continue
            attempt = _send(client, cfg, hook, part, body, sleep=sleep)
            if attempt.ok:
                outbox.delivered(store, [i.delivery_id for i in part], now, attempt.status or 200)
                tally.sent += len(part)
                continue
            verdict = outbox.failed(
                store, part, hook, now, retryable=attempt.retryable, status=attempt.status,
                error=attempt.error, response=attempt.response, retry_after=attempt.retry_after,
            )  # fmt: skip
            log.warning(
                f"deliver.{verdict}",
                destination=hook.label,
                items=len(part),
                status=attempt.status,
                error=attempt.error,
            )
            if verdict == "dead":
                tally.dead += len(part)
                continue
            tally.retrying += len(part)
            tally.deferred = sum(len(p) for p, _ in requests[index + 1 :])
            break  # the destination is struggling: leave the rest due for the next run
    return tally


def _send(
    client: httpx.Client,
    cfg: Config,
    hook: Webhook,
    items: list[Item],
    body: bytes,
    *,
    sleep: Callable[[float], None],
) -> _Attempt:
    try:
        response = client.post(hook.url, content=body, headers=headers(cfg, hook, items, body))
    except http.RETRYABLE_ERRORS as exc:
        return _Attempt(False, retryable=True, error=f"{type(exc).__name__}: {exc}")
    status = response.status_code
    if 200 <= status < 300:
        if hook.format == "splunk_hec" and hook.splunk_ack_channel:
            return _await_ack(client, cfg, hook, response, sleep)
        return _Attempt(True, status=status)
    return _Attempt(
        False,
        retryable=status in http.RETRYABLE_STATUS,
        status=status,
        error=f"HTTP {status}",
        response=response.text,
        retry_after=http.retry_after_seconds(response.headers.get("Retry-After")),
    )


def ack_url(url: str) -> str:
    base = httpx.URL(url)
    path = base.path.split("/services/collector")[0] + "/services/collector/ack"
    return str(base.copy_with(path=path, query=None))


def _await_ack(
    client: httpx.Client,
    cfg: Config,
    hook: Webhook,
    response: httpx.Response,
    sleep: Callable[[float], None],
) -> _Attempt:
    """Splunk indexer acknowledgement: poll until the batch's ackId reads true, or give up."""
    try:
        ack_id = response.json()["ackId"]
    except (ValueError, KeyError, TypeError):
        return _Attempt(False, retryable=True, status=response.status_code,
                        error="no ackId in the HEC response", response=response.text)  # fmt: skip
    heads = {"X-Splunk-Request-Channel": hook.splunk_ack_channel}
    if hook.token is not None:
        heads["Authorization"] = f"Splunk {cfg.secret(hook.token)}"
    deadline = time.monotonic() + hook.splunk_ack_timeout_seconds
    while True:
        answer: Any = None
        try:
            reply = client.post(
                ack_url(hook.url),
                params={"channel": hook.splunk_ack_channel},
                json={"acks": [ack_id]},
                headers=heads,
            )
            answer = reply.json().get("acks", {}).get(str(ack_id)) if reply.is_success else None
        except (httpx.TransportError, ValueError, AttributeError):
            answer = None
        if answer is True:
            return _Attempt(True, status=response.status_code)
        if time.monotonic() >= deadline:
            return _Attempt(False, retryable=True, status=response.status_code,
                            error=f"ackId {ack_id} not acknowledged in time")  # fmt: skip
        sleep(0.2)
