"""Demo GCS traffic, written as a Log Router sink export (``sentinel demo`` loads it).

The project mirrors the AWS demo: a hydrator service account pulls every shard of the served
model with ranged GETs a few times a day, a trainer writes checkpoints, people read small files
and list during working hours, and the last day holds the odd events the rules should find (a
partner service account copying the whole model at night, a denied read with a redacted caller,
protection tampering, an IAM grant, a delete of a promoted checkpoint). One entry is duplicated
across files, as sinks may do. A manifest of object sizes is written beside the export; one small
object is left out of it so the demo shows a read of unknown size.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROJECT = "acme-ml-prod"
WEIGHTS = "acme-weights-prod-gcs"
CKPT = "acme-ckpt-prod-gcs"
NOTEBOOKS = "acme-ml-notebooks"
MODEL = "llm-70b/v3.2"
SHARDS = 30
SHARD_BYTES = 4_984_292_344
HYDRATOR = f"weights-hydrator@{PROJECT}.iam.gserviceaccount.com"
TRAINER = f"trainer@{PROJECT}.iam.gserviceaccount.com"
PARTNER = "partner-eval@partner-proj-123.iam.gserviceaccount.com"
HUMANS = ("alice@acme.example", "bob.ops@acme.example")
_AGENT = "gcloud-python/2.19.0 gccl/2.19.0 gl-python/3.11.9,gzip(gfe)"


@dataclass(frozen=True)
class DemoExport:
    root: Path
    files: int
    entries: int
    manifest: Path


def shard_key(i: int) -> str:
    return f"{MODEL}/model-{i:05d}-of-{SHARDS:05d}.safetensors"


class _Writer:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.entries: list[dict[str, Any]] = []

    def add(
        self,
        when: dt.datetime,
        method: str,
        bucket: str,
        key: str | None,
        actor: str | None,
        *,
        ip: str = "10.128.0.42",
        log: str = "data_access",
        status: dict[str, Any] | None = None,
        size: int | None = None,
        request: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        nanos = self.rng.randrange(1000)
        stamp = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond:06d}{nanos:03d}Z"
        auth: dict[str, Any] = {}
        if actor:
            kind = "serviceAccount" if actor.endswith(".gserviceaccount.com") else "user"
            auth = {"principalEmail": actor, "principalSubject": f"{kind}:{actor}"}
        payload: dict[str, Any] = {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "status": status or {},
            "authenticationInfo": auth,
            "requestMetadata": {"callerIp": ip, "callerSuppliedUserAgent": _AGENT},
            "serviceName": "storage.googleapis.com",
            "methodName": method,
            "resourceName": f"projects/_/buckets/{bucket}"
            + (f"/objects/{key}" if key is not None else ""),
        }
        if size is not None:
            payload["response"] = {"bucket": bucket, "name": key, "size": str(size),
                                   "generation": str(int(when.timestamp() * 1e6))}  # fmt: skip
        if request is not None:
            payload["request"] = request
        payload.update(extra or {})
        self.entries.append({
            "protoPayload": payload,
            "insertId": f"{self.rng.getrandbits(48):012x}",
            "resource": {"type": "gcs_bucket", "labels": {
                "project_id": PROJECT, "bucket_name": bucket, "location": "us-central1"}},
            "timestamp": stamp,
            "severity": "ERROR" if status else ("NOTICE" if log == "activity" else "INFO"),
            "logName": f"projects/{PROJECT}/logs/cloudaudit.googleapis.com%2F{log}",
            "receiveTimestamp": stamp,
        })  # fmt: skip


def _hydrate(w: _Writer, start: dt.datetime, ip: str) -> None:
    """One node pulls the model: a list, config files, then every shard in ranged GETs."""
    w.add(start, "storage.objects.list", WEIGHTS, None, HYDRATOR, ip=ip)
    for name in ("config.json", "tokenizer.json"):
        w.add(start + dt.timedelta(seconds=1), "storage.objects.get", WEIGHTS,
              f"{MODEL}/{name}", HYDRATOR, ip=ip)  # fmt: skip
    for i in range(1, SHARDS + 1):
        at = start + dt.timedelta(seconds=2 + 6 * i)
        for part in range(w.rng.randint(3, 6)):  # parallel ranged GETs of one shard
            w.add(at + dt.timedelta(milliseconds=40 * part), "storage.objects.get", WEIGHTS,
                  shard_key(i), HYDRATOR, ip=ip)  # fmt: skip


def _day(w: _Writer, day: dt.datetime, last: bool) -> None:
    rng = w.rng
    for hour in (2, 10, 18):  # rollouts: one or two nodes hydrate
        for node in range(rng.randint(1, 2)):
            _hydrate(w, day + dt.timedelta(hours=hour, minutes=rng.randrange(20)),
                     f"10.128.0.{40 + node}")  # fmt: skip
    for hour in range(0, 24, 2):  # training checkpoints
        at = day + dt.timedelta(hours=hour, minutes=30)
        step = int((at - dt.datetime(2025, 1, 1)).total_seconds() // 7200)
        for part in range(2):
            w.add(at + dt.timedelta(seconds=part), "storage.objects.create", CKPT,
                  f"run-7/step-{step}/part-{part}.pt", TRAINER, ip="10.128.0.77",
                  size=rng.randint(1_500_000_000, 2_500_000_000))  # fmt: skip
    if day.weekday() < 5:  # people, working hours
        for human in HUMANS:
            for _ in range(rng.randint(1, 4)):
                at = day + dt.timedelta(hours=rng.randint(9, 17), minutes=rng.randrange(60))
                ip = f"203.0.113.{10 + HUMANS.index(human)}"
                w.add(at, "storage.objects.list", WEIGHTS, None, human, ip=ip)
                # People read evaluation results, not weights (a bucket nobody watches).
                w.add(at + dt.timedelta(seconds=5), "storage.objects.get", NOTEBOOKS,
                      f"eval/{MODEL}/metrics.json", human, ip=ip)  # fmt: skip
    if last:
        _odd_events(w, day)


def _odd_events(w: _Writer, day: dt.datetime) -> None:
    night = day + dt.timedelta(hours=3, minutes=12)
    for i in range(1, SHARDS + 1):  # a partner identity copies the whole model at night
        w.add(night + dt.timedelta(seconds=20 * i), "storage.objects.get", WEIGHTS, shard_key(i),
              PARTNER, ip="198.51.100.150")  # fmt: skip
    w.add(day + dt.timedelta(hours=4), "storage.objects.get", WEIGHTS, shard_key(1), None,
          ip="198.51.100.23", status={"code": 7, "message": "PERMISSION_DENIED"})  # fmt: skip
    admin = HUMANS[1]
    w.add(day + dt.timedelta(hours=12, minutes=28), "storage.setIamPermissions", WEIGHTS, None,
          admin, ip="192.0.2.10", log="activity",
          extra={"serviceData": {"policyDelta": {"bindingDeltas": [
              {"action": "ADD", "role": "roles/storage.objectViewer",
               "member": "user:mallory@example.net"}]}}})  # fmt: skip
    w.add(day + dt.timedelta(hours=12, minutes=30), "storage.buckets.update", CKPT, None, admin,
          ip="192.0.2.10", log="activity",
          request={"metadata": {"versioning": {}, "lifecycle": {"rule": [
              {"action": {"type": "Delete"}, "condition": {"age": 1}}]}}})  # fmt: skip
    w.add(day + dt.timedelta(hours=12, minutes=41), "storage.objects.delete", CKPT,
          "promoted/llm-70b-v3.2/part-0.pt", admin, ip="192.0.2.10")  # fmt: skip


def write_demo_export(directory: Path, start: dt.date, days: int, seed: int = 7) -> DemoExport:
    """Write ``days`` days of GCS audit traffic from ``start`` as a sink export under
    ``directory`` (hourly files per log), plus ``objects-manifest.csv``; returns what was
    written. Deterministic for a given seed."""
    rng = random.Random(seed)  # noqa: S311  (demo data, not security)
    w = _Writer(rng)
    first = dt.datetime.combine(start, dt.time())
    for n in range(days):
        _day(w, first + dt.timedelta(days=n), last=n == days - 1)
    w.entries.sort(key=lambda e: e["timestamp"])
    w.entries.append(w.entries[len(w.entries) // 2])  # a sink may deliver an entry twice
    by_file: dict[Path, list[str]] = {}
    for e in w.entries:
        log = e["logName"].rsplit("%2F", 1)[1]
        when = dt.datetime.fromisoformat(e["timestamp"][:19])
        path = (directory / "cloudaudit.googleapis.com" / log / f"{when:%Y/%m/%d}"
                / f"{when:%H}:00:00_{when:%H}:59:59_S0.json")  # fmt: skip
        by_file.setdefault(path, []).append(json.dumps(e, separators=(",", ":")))
    for path, lines in by_file.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    manifest = directory / "objects-manifest.csv"
    rows = [f"{WEIGHTS},{shard_key(i)},{SHARD_BYTES}" for i in range(1, SHARDS + 1)]
    rows.append(f"{WEIGHTS},{MODEL}/config.json,1893")  # tokenizer.json left unknown on purpose
    manifest.write_text("bucket,key,size\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return DemoExport(directory, len(by_file), len(w.entries), manifest)
