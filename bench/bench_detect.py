"""Detection benchmark: 30 days, 1,000+ actors, 10M+ events, generated straight into
access_events with SQL; then a first (cold) incremental run, a full 30-day replay, and an
incremental run after one new hour. Each phase runs in its own process so its peak RSS is its own.

    python bench/bench_detect.py [--events 10800000] [--actors 1000] [--db /tmp/bench.duckdb]

Targets on 2 cores: incremental < 2 s, full replay < 60 s, RSS < 2 GiB.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sentinel import config, logs  # noqa: E402
from sentinel.detect import run_detect  # noqa: E402
from sentinel.store import Store  # noqa: E402

START = dt.datetime(2026, 4, 1)
DAYS = 30
HOURS = DAYS * 24
CONFIG = """
[watch]
buckets = ["acme-weights-prod", "acme-ckpt-prod", "acme-weights-gcs"]
models = ["acme-weights-prod/models/*/*"]

[hydrators]
actors = ["arn:aws:iam::111122223333:role/ml/serving/weights-hydrator*",
          "weights-hydrator-*@acme-ml-prod.iam.gserviceaccount.com"]
networks = ["vpce-0abc", "10.0.0.0/8", "gce-internal-ip"]

[[tenants]]
name = "team-0"
actors = ["arn:aws:iam::111122223333:role/team-0-*"]
models = ["acme-weights-prod/models/team-0/**"]

[[tenants]]
name = "team-1"
actors = ["arn:aws:iam::111122223333:role/team-1-*"]
models = ["acme-weights-prod/models/team-1/**"]

[promoted]
patterns = ["acme-ckpt-prod/promoted/**"]
"""

# Event i of n at hour h: 5% of actors are hydrators reading weights through the endpoint (AWS
# and GCS), a few team roles and one notebook touch the weights bucket now and then, everyone
# else reads and writes data-lake buckets. One load per hour of event time.
GENERATE = """
INSERT INTO access_events BY NAME
WITH base AS (
    SELECT i, hash(i) AS h, i * {hours} // {n} AS hour_index FROM range({first}, {last}) t(i)
), shaped AS (
    SELECT i, h, hour_index, (h % {actors})::INTEGER AS a, (hash(i * 7) % 100)::INTEGER AS p
    FROM base
)
SELECT
    CASE WHEN a % 20 = 1 THEN 'gcp' ELSE 'aws' END AS provider,
    'e' || i AS event_id, 'e' || i AS logical_id,
    TIMESTAMP '{start}' + INTERVAL (hour_index) HOUR
        + INTERVAL ((hash(i * 3) % 3600)::INTEGER) SECOND AS event_time,
    '111122223333' AS account,
    CASE WHEN a % 20 = 0 THEN 'arn:aws:iam::111122223333:role/ml/serving/weights-hydrator-' || a
         WHEN a % 20 = 1 THEN 'weights-hydrator-' || a || '@acme-ml-prod.iam.gserviceaccount.com'
         WHEN a = 2 THEN 'arn:aws:iam::111122223333:role/ds-notebook'
         ELSE 'arn:aws:iam::111122223333:role/team-' || (a % 4) || '-app-' || a END AS actor,
    CASE WHEN p < 80 THEN CASE WHEN a % 20 = 1 THEN 'storage.objects.get' ELSE 'GetObject' END
         WHEN p < 95 THEN 'PutObject' ELSE 'ListObjectsV2' END AS operation,
    CASE WHEN p < 80 THEN 'read' WHEN p < 95 THEN 'write' ELSE 'list' END AS action,
    false AS is_service_event,
    CASE WHEN a % 20 = 0 THEN 'acme-weights-prod'
         WHEN a % 20 = 1 THEN 'acme-weights-gcs'
         WHEN a = 2 AND p = 0 THEN 'acme-weights-prod'
         ELSE 'lake-' || (a % 37) END AS bucket,
    'models/team-' || (hash(i * 5) % 4) || '/m' || (hash(i * 11) % 20) || '/shard-'
        || (hash(i * 13) % 64) || '.safetensors' AS object_key,
    CASE WHEN p < 80 THEN (hash(i * 17) % 200000000)::BIGINT END AS bytes_out,
    a % 20 = 1 AS bytes_estimated,
    CASE WHEN a % 20 = 1 THEN 'gce-internal-ip' ELSE '10.0.' || (a % 250) || '.7' END AS src_ip,
    CASE WHEN a % 20 = 1 THEN NULL ELSE 'vpce-0abc' END AS vpce_id,
    'bench://generated' AS source_uri,
    hour_index + 1 AS load_id,
    (i % 100000)::INTEGER AS source_index
FROM shaped
"""


def generate(db: str, events: int, actors: int) -> dict[str, float]:
    Path(db).unlink(missing_ok=True)
    started = time.perf_counter()
    with Store.open(db, memory_limit="1500MB") as store:
        chunk = 2_000_000
        for first in range(0, events, chunk):
            store.execute(
                GENERATE.format(
                    first=first, last=min(events, first + chunk), n=events, hours=HOURS,
                    actors=actors, start=START.isoformat(sep=" "),
                )
            )  # fmt: skip
        store.execute(
            "INSERT INTO loads SELECT DISTINCT load_id, 'aws', 'bench', now()::TIMESTAMP, 1,"
            " 0, 0 FROM access_events"
        )
        distinct_actors = store.scalar("SELECT count(DISTINCT actor) FROM access_events")
    return {"seconds": time.perf_counter() - started, "events": events, "actors": distinct_actors}


def add_hour(db: str, events: int, actors: int) -> dict[str, float]:
    """One more hour of traffic (the same shape), as load HOURS + 1."""
    per_hour = events // HOURS
    started = time.perf_counter()
    with Store.open(db, memory_limit="1500MB") as store:
        sql = GENERATE.format(
            first=events, last=events + per_hour, n=events, hours=HOURS, actors=actors,
            start=START.isoformat(sep=" "),
        )  # fmt: skip
        store.execute(sql)
        store.execute(f"INSERT INTO loads VALUES ({HOURS + 1}, 'aws', 'bench', now(), 1, 0, 0)")
    return {"seconds": time.perf_counter() - started, "events": per_hour}


def detect(db: str, mode: str) -> dict[str, float]:
    cfg = config.loads(CONFIG)
    end = START + dt.timedelta(days=DAYS, hours=1)
    with Store.open(db, memory_limit="1500MB") as store:
        started = time.perf_counter()
        if mode == "replay":
            result = run_detect(store, cfg, since=START, until=end, now=end)
        else:
            result = run_detect(store, cfg, now=end)
        seconds = time.perf_counter() - started
        findings = store.scalar("SELECT count(*) FROM findings")
    failed = [o.rule_id for o in result.failed]
    if failed:
        raise SystemExit(f"rules failed: {failed}")
    slowest = max(result.outcomes, key=lambda o: o.seconds)
    return {
        "seconds": seconds,
        "findings": findings,
        "slowest_rule": f"{slowest.rule_id} {slowest.seconds:.2f}s",
    }


def phase(name: str, args: argparse.Namespace) -> dict[str, float]:
    """Run one phase in a fresh process and return its figures plus its peak RSS."""
    out = subprocess.run(
        [sys.executable, __file__, "--phase", name, "--db", args.db,
         "--events", str(args.events), "--actors", str(args.actors)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if out.returncode:
        raise SystemExit(out.stderr[-3000:])
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=10_800_000)
    parser.add_argument("--actors", type=int, default=1000)
    default_db = str(Path(tempfile.gettempdir()) / "sentinel-bench-detect.duckdb")
    parser.add_argument("--db", default=default_db)
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        logs.configure("warning")
        runners = {
            "generate": lambda: generate(args.db, args.events, args.actors),
            "first": lambda: detect(args.db, "incremental"),
            "replay": lambda: detect(args.db, "replay"),
            "add_hour": lambda: add_hour(args.db, args.events, args.actors),
            "incremental": lambda: detect(args.db, "incremental"),
        }
        figures = runners[args.phase]()
        figures["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(figures))
        return
    results = {
        name: phase(name, args)
        for name in ("generate", "first", "replay", "add_hour", "incremental")
    }
    gen = results["generate"]
    print(f"data: {gen['events']:,} events, {gen['actors']:,} actors, {DAYS} days")
    print(f"{'phase':34} {'seconds':>8} {'peak RSS MiB':>13} {'findings':>9}  slowest rule")
    labels = {
        "generate": "generate (SQL into access_events)",
        "first": "first run (cold, cursors at 0)",
        "replay": "full 30-day replay (--since)",
        "add_hour": "add one hour of events",
        "incremental": "incremental run after one hour",
    }
    for name, label in labels.items():
        r = results[name]
        print(
            f"{label:34} {r['seconds']:8.2f} {r['rss_mib']:13.0f} {r.get('findings', ''):>9}"
            f"  {r.get('slowest_rule', '')}"
        )
    replay, inc = results["replay"]["seconds"], results["incremental"]["seconds"]
    print(
        f"replay events/s: {gen['events'] / replay:,.0f}; incremental / replay: {inc / replay:.3f}"
    )
    print("targets: incremental < 2 s, replay < 60 s, RSS < 2048 MiB")


if __name__ == "__main__":
    main()
