"""Benchmark: CloudTrail ingest throughput and memory, against baselines measured in the same run.

Prints, for 1M and 3M generated events: Sentinel's end-to-end events/s and peak RSS (default raw
policy, fresh database, one process; median and worst of three runs), a naive loader (gzip +
json.loads + row inserts) on a sample of the same files, and the decompression ceiling (zcat, two
processes, median of three) over all of them.

    python bench/ingest_cloudtrail.py            # 1M and 3M events (about five minutes)
    python bench/ingest_cloudtrail.py --quick    # 200k events, for a smoke run
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cloudtrail_corpus import build, files_of  # noqa: E402

sys.path.insert(0, str(HERE.parent))
from sentinel.sources.cloudtrail_records import spool_root  # noqa: E402

RUNS = 3


def median_run(run: Callable[[], dict[str, float]]) -> dict[str, float]:
    """The run with the median rate; ``peak_rss_mib`` is the worst of all runs."""
    runs = sorted((run() for _ in range(RUNS)), key=lambda r: r["events_per_s"])
    chosen = dict(runs[len(runs) // 2])
    if "peak_rss_mib" in chosen:
        chosen["peak_rss_mib"] = max(r["peak_rss_mib"] for r in runs)
    return chosen


def sentinel_run(corpus: Path, keep_raw: str = "non_read") -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [
                sys.executable,
                str(HERE / "_ingest_once.py"),
                f"{tmp}/bench.duckdb",
                str(corpus),
                keep_raw,
            ],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def naive_run(files: list[Path], budget_s: float = 30.0) -> dict[str, float]:
    """What a first attempt looks like: parse in Python, insert row by row."""
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE ev (event_id VARCHAR, event_time VARCHAR, actor VARCHAR, operation VARCHAR,"
        " bucket VARCHAR, object_key VARCHAR, bytes_out BIGINT, error_code VARCHAR)"
    )
    events = 0
    started = time.perf_counter()
    for path in files:
        records = json.loads(gzip.decompress(path.read_bytes()))["Records"]
        rows = []
        for r in records:
            ui = r.get("userIdentity", {})
            issuer = ui.get("sessionContext", {}).get("sessionIssuer", {}).get("arn")
            rp = r.get("requestParameters") or {}
            extra = r.get("additionalEventData") or {}
            rows.append((r["eventID"], r["eventTime"], issuer or ui.get("arn"), r["eventName"],
                         rp.get("bucketName"), rp.get("key"), extra.get("bytesTransferredOut"),
                         r.get("errorCode")))  # fmt: skip
        con.executemany("INSERT INTO ev VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        events += len(rows)
        if time.perf_counter() - started > budget_s:
            break
    seconds = time.perf_counter() - started
    return {"events": events, "seconds": seconds, "events_per_s": events / seconds}


def zcat_run(files: list[Path], events: int) -> dict[str, float]:
    started = time.perf_counter()
    half = len(files) // 2
    procs = [
        subprocess.Popen(["zcat", *map(str, chunk)], stdout=subprocess.DEVNULL)
        for chunk in (files[:half], files[half:])
    ]
    for p in procs:
        p.wait()
    seconds = time.perf_counter() - started
    return {"events": events, "seconds": seconds, "events_per_s": events / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="200k events only")
    parser.add_argument(
        "--out", default=str(HERE / "out"), help="where generated corpora are cached"
    )
    args = parser.parse_args()
    sizes = [200_000] if args.quick else [1_000_000, 3_000_000]
    print(
        f"machine: {os.cpu_count()} cores; duckdb {duckdb.__version__}; split files spooled in"
        f" {spool_root()}; median of {RUNS} runs"
    )
    rows = []
    for size in sizes:
        corpus = build(Path(args.out) / f"cloudtrail-{size}", size)
        files = files_of(corpus)
        mb = sum(f.stat().st_size for f in files) / 2**20
        print(f"\n== {size:,} events in {len(files)} files ({mb:.0f} MiB gzipped)")
        zcat_run(files, size)  # warm the page cache
        z = median_run(functools.partial(zcat_run, files, size))
        s = median_run(functools.partial(sentinel_run, corpus))
        n = naive_run(files)
        rows.append((size, s, n, z))
        print(
            f"  sentinel  {s['events_per_s']:>10,.0f} ev/s  peak RSS {s['peak_rss_mib']:,.0f} MiB"
            f"  db {s['db_mib']:,.0f} MiB  ({s['seconds']:.1f}s)"
        )
        print(
            f"  naive     {n['events_per_s']:>10,.0f} ev/s  (json.loads + row inserts, {n['events']:,} events)"
        )
        print(f"  zcat x2   {z['events_per_s']:>10,.0f} ev/s  (decompression ceiling)")
        print(
            f"  ratios    {s['events_per_s'] / n['events_per_s']:.1f}x naive;"
            f" {100 * s['events_per_s'] / z['events_per_s']:.1f}% of zcat x2"
        )
    if len(rows) > 1:
        first, last = rows[0][1], rows[-1][1]
        print(
            f"\nRSS growth {rows[0][0]:,} -> {rows[-1][0]:,} events:"
            f" {first['peak_rss_mib']:,.0f} -> {last['peak_rss_mib']:,.0f} MiB"
        )


if __name__ == "__main__":
    main()
