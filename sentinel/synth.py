"""Seeded generator of realistic CloudTrail files for the demo, tests and benchmarks.

It models a weights platform: hydrators loading model shards (ranged GETs through a VPC
endpoint), a trainer writing checkpoints, a promoter copying releases into the prod bucket,
tenant teams reading their own models, humans looking around, plus the management events of
other services that share a trail. Files follow CloudTrail's delivery layout (5-minute files in
delivery-day folders, some delivered late) beside digests and folder placeholders, so an
ingester meets what it meets in a real trail bucket.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import random
import string
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ACCOUNT = "111122223333"
PARTNER_ACCOUNT = "444455556666"
REGION = "us-east-1"
WEIGHTS = "acme-weights-prod"
CHECKPOINTS = "acme-ckpt-prod"
STAGING = "acme-weights-staging"
CACHE = "acme-inference-cache"
VPCE = "vpce-0a1b2c3d4e5f60718"
SHARD_BYTES = 4_984_292_344
PART_BYTES = 64 * 1024 * 1024
MODELS = {"team-a": ["llm-70b", "llm-8b"], "team-b": ["vision-xl"]}


def role(path_name: str, account: str = ACCOUNT) -> str:
    return f"arn:aws:iam::{account}:role/{path_name}"


HYDRATOR = role("ml/serving/weights-hydrator")
TRAINER = role("ml/train/trainer-checkpoint-writer")
PROMOTER = role("ml/release/model-promoter")
TEAM_A = role("team-a-inference")
TEAM_B = role("team-b-inference")
NOTEBOOK = role("ds-notebook-runner")
PARTNER = role("partner-eval-reader", PARTNER_ACCOUNT)
ADMIN = role("platform-admin")


@dataclass
class Scenario:
    start: dt.datetime
    days: int
    seed: int = 7
    # Average background events per hour (hydrator loads come in bursts on top of this).
    events_per_hour: int = 120
    hydrations_per_day: int = 4
    shards_per_model: int = 30
    parts_per_shard: int = 4
    late_file_share: float = 0.02
    incidents: bool = False
    noise_files: bool = True
    promotions: int = 0
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)  # noqa: S311 (synthetic data, not secrets)

    @property
    def end(self) -> dt.datetime:
        return self.start + dt.timedelta(days=self.days)


def _ts(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


class _Factory:
    """Builds records with the fields and shapes CloudTrail uses (eventVersion 1.11)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def token(self, n: int, alphabet: str = string.ascii_uppercase + string.digits) -> str:
        return "".join(self.rng.choices(alphabet, k=n))

    def identity(self, arn: str, session: str) -> dict[str, Any]:
        account = arn.split(":")[4]
        if ":user/" in arn:
            return {
                "type": "IAMUser",
                "principalId": "AIDA" + self.token(17),
                "arn": arn,
                "accountId": account,
                "accessKeyId": "AKIA" + self.token(16),
                "userName": arn.rsplit("/", 1)[-1],
            }
        name = arn.rsplit("/", 1)[-1]
        role_id = "AROA" + self.token(17)
        return {
            "type": "AssumedRole",
            "principalId": f"{role_id}:{session}",
            "arn": f"arn:aws:sts::{account}:assumed-role/{name}/{session}",
            "accountId": account,
            "accessKeyId": "ASIA" + self.token(16),
            "sessionContext": {
                "sessionIssuer": {
                    "type": "Role",
                    "principalId": role_id,
                    "arn": arn,
                    "accountId": account,
                    "userName": name,
                },
                "attributes": {"creationDate": "2025-01-01T00:00:00Z", "mfaAuthenticated": "false"},
            },
        }

    def s3(
        self,
        t: dt.datetime,
        actor: str,
        session: str,
        name: str,
        bucket: str,
        key: str | None,
        *,
        bytes_out: int = 0,
        bytes_in: int = 0,
        ip: str = "10.20.30.40",
        vpce: str | None = None,
        error: str | None = None,
        extra_params: dict[str, Any] | None = None,
        management: bool = False,
        ua: str = "[Boto3/1.37.1 md/Botocore#1.37.1 ua/2.1 os/linux#6.8.0 lang/python#3.11.9]",
    ) -> dict[str, Any]:
        params: dict[str, Any] = {
            "bucketName": bucket,
            "Host": f"{bucket}.s3.{REGION}.amazonaws.com",
        }
        if key is not None:
            params["key"] = key
        params.update(extra_params or {})
        resources: list[dict[str, Any]] = []
        if key is not None:
            resources.append({"type": "AWS::S3::Object", "ARN": f"arn:aws:s3:::{bucket}/{key}"})
        resources.append(
            {"accountId": ACCOUNT, "type": "AWS::S3::Bucket", "ARN": f"arn:aws:s3:::{bucket}"}
        )
        record: dict[str, Any] = {
            "eventVersion": "1.11",
            "userIdentity": self.identity(actor, session),
            "eventTime": _ts(t),
            "eventSource": "s3.amazonaws.com",
            "eventName": name,
            "awsRegion": REGION,
            "sourceIPAddress": ip,
            "userAgent": ua,
            "requestParameters": params,
            "responseElements": None,
            "additionalEventData": {
                "SignatureVersion": "SigV4",
                "CipherSuite": "TLS_AES_128_GCM_SHA256",
                "bytesTransferredIn": bytes_in,
                "AuthenticationMethod": "AuthHeader",
                "x-amz-id-2": self.token(76, string.ascii_letters + string.digits + "+/"),
                "bytesTransferredOut": bytes_out,
            },
            "requestID": self.token(16),
            "eventID": self.uid(),
            "readOnly": name.startswith(("Get", "Head", "List")),
            "resources": resources,
            "eventType": "AwsApiCall",
            "managementEvent": management,
            "recipientAccountId": ACCOUNT,
            "eventCategory": "Management" if management else "Data",
            "tlsDetails": {
                "tlsVersion": "TLSv1.3",
                "cipherSuite": "TLS_AES_128_GCM_SHA256",
                "clientProvidedHostHeader": f"{bucket}.s3.{REGION}.amazonaws.com",
            },
        }
        if vpce:
            record["vpcEndpointId"] = vpce
            record["vpcEndpointAccountId"] = ACCOUNT
        if error:
            record["errorCode"] = error
            record["errorMessage"] = "Access Denied"
        return record

    def other_service(self, t: dt.datetime) -> dict[str, Any]:
        """A management event of another service sharing the trail (not object storage)."""
        return {
            "eventVersion": "1.11",
            "userIdentity": self.identity(role("ops/autoscaler"), "asg"),
            "eventTime": _ts(t),
            "eventSource": "ec2.amazonaws.com",
            "eventName": "DescribeInstances",
            "awsRegion": REGION,
            "sourceIPAddress": "10.9.8.7",
            "userAgent": "aws-sdk-go-v2/1.30.0",
            "requestParameters": {"maxResults": 1000},
            "responseElements": None,
            "requestID": self.uid(),
            "eventID": self.uid(),
            "readOnly": True,
            "eventType": "AwsApiCall",
            "managementEvent": True,
            "recipientAccountId": ACCOUNT,
            "eventCategory": "Management",
        }


def generate_records(sc: Scenario) -> Iterator[dict[str, Any]]:
    """Every record of the scenario, roughly in time order (files shuffle them later)."""
    rng = sc._rng
    f = _Factory(rng)
    hour = sc.start.replace(minute=0, second=0, microsecond=0)
    while hour < sc.end:
        yield from _background_hour(f, rng, sc, hour)
        if rng.random() < sc.hydrations_per_day / 24:
            yield from _hydration(f, rng, sc, hour + dt.timedelta(minutes=rng.randrange(60)))
        hour += dt.timedelta(hours=1)
    if sc.incidents:
        yield from incident_records(f, sc.end - dt.timedelta(hours=3))


def _background_hour(
    f: _Factory, rng: random.Random, sc: Scenario, hour: dt.datetime
) -> Iterator[dict[str, Any]]:
    """Routine traffic: only hydrators read weights; teams read their serving cache; the trainer
    writes checkpoints; the release pipeline copies promoted checkpoints."""
    n = max(1, int(rng.gauss(sc.events_per_hour, sc.events_per_hour * 0.1)))
    for _ in range(n):
        t = hour + dt.timedelta(seconds=rng.randrange(3600))
        pick = rng.random()
        if pick < 0.25:
            model = rng.choice(MODELS["team-a"])
            yield f.s3(
                t,
                HYDRATOR,
                f"pod-{rng.randrange(40)}",
                "GetObject",
                WEIGHTS,
                f"models/team-a/{model}/config.json",
                bytes_out=rng.randrange(800, 4000),
                vpce=VPCE,
            )
        elif pick < 0.40:
            team, actor = rng.choice([("team-a", TEAM_A), ("team-b", TEAM_B)])
            yield f.s3(
                t,
                actor,
                "svc",
                "GetObject",
                CACHE,
                f"{team}/kv/{rng.randrange(10**6)}",
                bytes_out=rng.randrange(10**4, 10**6),
                vpce=VPCE,
            )
        elif pick < 0.60:
            model = rng.choice(MODELS["team-a"])
            yield f.s3(
                t,
                HYDRATOR,
                f"pod-{rng.randrange(40)}",
                "HeadObject",
                WEIGHTS,
                f"models/team-a/{model}/model-00001-of-00030.safetensors",
                vpce=VPCE,
            )
        elif pick < 0.75:
            step = int((t - sc.start).total_seconds() // 3600) * 100
            yield f.s3(
                t,
                TRAINER,
                f"job-{step // 2400}-rank0",
                "PutObject",
                CHECKPOINTS,
                f"runs/llm-70b/step-{step:07d}/shard-{rng.randrange(8)}.safetensors",
                bytes_in=rng.randrange(10**8, 10**9),
            )
        elif pick < 0.80 and t < sc.start + dt.timedelta(days=sc.days * 2 // 3):
            # Staging uploads stop logging two thirds in: a watched bucket that goes silent.
            yield f.s3(
                t,
                TRAINER,
                "stage",
                "PutObject",
                STAGING,
                f"candidates/{rng.randrange(10**6)}.safetensors",
                bytes_in=10**8,
            )
        elif pick < 0.88:
            yield f.s3(
                t,
                HYDRATOR,
                f"pod-{rng.randrange(40)}",
                "ListObjectsV2",
                WEIGHTS,
                None,
                vpce=VPCE,
                extra_params={"list-type": "2", "prefix": "models/team-a/"},
            )
        elif pick < 0.98:
            yield f.other_service(t)
        else:
            sc.promotions += 1
            yield f.s3(
                t,
                PROMOTER,
                "promote",
                "CopyObject",
                CHECKPOINTS,
                f"promoted/llm-70b/r{sc.promotions:05d}/model.safetensors",
                bytes_out=312,
                extra_params={"x-amz-copy-source": _run_key(rng.randrange(10**6))},
            )


def _run_key(step: int) -> str:
    return f"{CHECKPOINTS}/runs/llm-70b/step-{step:07d}/model.safetensors"


def _hydration(
    f: _Factory, rng: random.Random, sc: Scenario, t: dt.datetime
) -> Iterator[dict[str, Any]]:
    """A serving pod loads a whole model: every shard in parallel ranged GETs."""
    model = rng.choice(MODELS["team-a"])
    pod = f"pod-{rng.randrange(40)}"
    for shard in range(1, sc.shards_per_model + 1):
        key = f"models/team-a/{model}/model-{shard:05d}-of-{sc.shards_per_model:05d}.safetensors"
        for _ in range(sc.parts_per_shard):
            yield f.s3(
                t + dt.timedelta(seconds=rng.randrange(120)),
                HYDRATOR,
                pod,
                "GetObject",
                WEIGHTS,
                key,
                bytes_out=PART_BYTES,
                vpce=VPCE,
                ua="[aws-sdk-rust/1.3.9 ua/2.1 api/s3/1.77.0 os/linux lang/rust/1.84.1]",
            )


def incident_records(f: _Factory, t: dt.datetime) -> Iterator[dict[str, Any]]:
    """One planted incident per detection rule, at ``t``."""
    step = dt.timedelta(minutes=1)
    # A notebook role pulls a whole model: non-hydrator read, bytes anomaly, first seen, full copy.
    for shard in range(1, 31):
        key = f"models/team-a/llm-70b/model-{shard:05d}-of-00030.safetensors"
        yield f.s3(
            t + shard * step / 10,
            NOTEBOOK,
            "alice@acme.example",
            "GetObject",
            WEIGHTS,
            key,
            bytes_out=SHARD_BYTES,
            ip="198.51.100.23",
        )
    # Team B reads team A's model: cross-tenant.
    yield f.s3(
        t + 5 * step,
        TEAM_B,
        "svc",
        "GetObject",
        WEIGHTS,
        "models/team-a/llm-8b/model-00001-of-00030.safetensors",
        bytes_out=PART_BYTES,
        vpce=VPCE,
    )
    # Probing: denied reads from a partner account.
    for i in range(6):
        yield f.s3(
            t + (10 + i) * step,
            PARTNER,
            "eval-run-991",
            "GetObject",
            WEIGHTS,
            f"models/team-a/llm-70b/model-{i + 1:05d}-of-00030.safetensors",
            ip="203.0.113.9",
            error="AccessDenied",
            bytes_out=243,
        )
    # The hydrator role used from outside the VPC endpoint.
    yield f.s3(
        t + 20 * step,
        HYDRATOR,
        "stolen",
        "GetObject",
        WEIGHTS,
        "models/team-a/llm-8b/model-00002-of-00030.safetensors",
        bytes_out=PART_BYTES,
        ip="192.0.2.77",
    )
    # A hydrator pod pulls whole shards of every model within an hour: far above its baseline.
    for model in MODELS["team-a"]:
        for shard in range(1, 31):
            key = f"models/team-a/{model}/model-{shard:05d}-of-00030.safetensors"
            yield f.s3(
                t + 40 * step + shard * step / 10,
                HYDRATOR,
                "pod-7",
                "GetObject",
                WEIGHTS,
                key,
                bytes_out=SHARD_BYTES,
                vpce=VPCE,
            )
    # A promoted checkpoint deleted, and its bucket's lifecycle weakened.
    yield f.s3(
        t + 30 * step,
        role("ops/artifact-janitor"),
        "janitor",
        "DeleteObject",
        CHECKPOINTS,
        "promoted/llm-70b/v3/model.safetensors",
    )
    yield f.s3(
        t + 31 * step,
        ADMIN,
        "carol@acme.example",
        "PutBucketLifecycle",
        CHECKPOINTS,
        None,
        management=True,
        ua="S3Console/0.4",
        extra_params={
            "lifecycle": "",
            "LifecycleConfiguration": {
                "Rule": {"ID": "expire-all", "Status": "Enabled", "Expiration": {"Days": 1}}
            },
        },
    )


def _file_key(account: str, delivered: dt.datetime, rng: random.Random) -> str:
    unique = "".join(rng.choices(string.ascii_letters + string.digits, k=16))
    return (
        f"AWSLogs/{account}/CloudTrail/{REGION}/{delivered:%Y/%m/%d}/"
        f"{account}_CloudTrail_{REGION}_{delivered:%Y%m%dT%H%MZ}_{unique}.json.gz"
    )


def write_trail(root: Path, sc: Scenario, *, compresslevel: int = 6) -> dict[str, int]:
    """Write the scenario as a CloudTrail bucket layout under ``root``; returns counts."""
    rng = random.Random(sc.seed + 1)  # noqa: S311 (synthetic data, not secrets)
    buckets: dict[dt.datetime, list[dict[str, Any]]] = {}
    files = records = 0

    def flush(slot: dt.datetime, recs: list[dict[str, Any]]) -> None:
        nonlocal files, records
        delivered = slot + dt.timedelta(minutes=5 + rng.randrange(5))
        if rng.random() < sc.late_file_share:
            delivered += dt.timedelta(hours=rng.randrange(6, 30))  # late delivery, later folder
        rng.shuffle(recs)  # CloudTrail files are unordered
        path = root / _file_key(ACCOUNT, delivered, rng)
        path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"Records": recs}, separators=(",", ":")).encode()
        path.write_bytes(gzip.compress(body, compresslevel=compresslevel, mtime=0))
        files += 1
        records += len(recs)

    newest = sc.start
    for rec in generate_records(sc):
        t = dt.datetime.strptime(rec["eventTime"], "%Y-%m-%dT%H:%M:%SZ")
        slot = t.replace(minute=t.minute - t.minute % 5, second=0)
        buckets.setdefault(slot, []).append(rec)
        if t > newest + dt.timedelta(hours=2):
            # Records come hour by hour; slots two hours old are complete.
            newest = t
            for old in sorted(s for s in buckets if s < t - dt.timedelta(hours=2)):
                flush(old, buckets.pop(old))
    for slot in sorted(buckets):
        flush(slot, buckets.pop(slot))
    if sc.noise_files:
        _write_noise(root, sc, rng)
    return {"files": files, "records": records}


def _write_noise(root: Path, sc: Scenario, rng: random.Random) -> None:
    """What else lives in a real trail bucket: digests, folder markers, other services."""
    day = sc.start.date()
    base = root / "AWSLogs" / ACCOUNT
    digest = base / "CloudTrail-Digest" / REGION / f"{day:%Y/%m/%d}"
    digest.mkdir(parents=True, exist_ok=True)
    name = f"{ACCOUNT}_CloudTrail-Digest_{REGION}_trail_{REGION}_{day:%Y%m%d}T000000Z.json.gz"
    (digest / name).write_bytes(gzip.compress(b'{"awsAccountId":"111122223333","logFiles":[]}'))
    config = base / "Config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "ConfigWritabilityCheckFile").write_bytes(b"")
