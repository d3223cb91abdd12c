"""Build (and cache) a large CloudTrail corpus for benchmarks, fast.

Records come from ``sentinel.synth`` (realistic shapes, ~2 KB each); a pool of them is serialized
once with placeholders, and files are stamped out by replacing event ids and times, so millions
of records take seconds rather than minutes. Files mirror CloudTrail: one ``{"Records": [...]}``
gzip object per 5-minute delivery.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import random
import sys
import uuid
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sentinel.synth import Scenario, generate_records

POOL = 4000


def _pool(seed: int) -> list[str]:
    sc = Scenario(start=dt.datetime(2026, 1, 1), days=2, seed=seed, events_per_hour=200,
                  hydrations_per_day=24, noise_files=False)  # fmt: skip
    templates = []
    for rec in generate_records(sc):
        if (
            rec["eventSource"] != "s3.amazonaws.com"
            and random.Random(len(templates)).random() < 0.8
        ):
            continue  # keep a realistic few percent of other services' events
        rec["eventID"] = "@ID@"
        rec["eventTime"] = "@TIME@"
        templates.append(json.dumps(rec, separators=(",", ":")))
        if len(templates) >= POOL:
            break
    return templates


def _write_file(args: tuple[Path, int, int, int]) -> int:
    root, index, per_file, seed = args
    rng = random.Random(seed * 1_000_003 + index)
    templates = _POOL_CACHE
    slot = dt.datetime(2026, 1, 1) + dt.timedelta(minutes=5 * index)
    parts = []
    for _ in range(per_file):
        t = slot + dt.timedelta(seconds=rng.randrange(300))
        parts.append(
            rng.choice(templates)
            .replace("@ID@", str(uuid.UUID(int=rng.getrandbits(128), version=4)))
            .replace("@TIME@", t.strftime("%Y-%m-%dT%H:%M:%SZ"))
        )
    delivered = slot + dt.timedelta(minutes=7)
    unique = "".join(
        rng.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", k=16)
    )
    key = (f"AWSLogs/111122223333/CloudTrail/us-east-1/{delivered:%Y/%m/%d}/"
           f"111122223333_CloudTrail_us-east-1_{delivered:%Y%m%dT%H%MZ}_{unique}.json.gz")  # fmt: skip
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    body = ('{"Records":[' + ",".join(parts) + "]}").encode()
    path.write_bytes(gzip.compress(body, compresslevel=6, mtime=0))
    return per_file


_POOL_CACHE: list[str] = []


def _init(seed: int) -> None:
    _POOL_CACHE.extend(_pool(seed))


def build(root: Path, events: int, *, per_file: int = 5000, seed: int = 11) -> Path:
    """Write ``events`` records under ``root`` unless an identical corpus is already there."""
    marker = root / f".complete-{events}-{per_file}-{seed}"
    if marker.exists():
        return root
    files = max(1, events // per_file)
    with ProcessPoolExecutor(max_workers=2, initializer=_init, initargs=(seed,)) as pool:
        list(pool.map(_write_file, [(root, i, per_file, seed) for i in range(files)], chunksize=4))
    marker.write_text("ok")
    return root


def files_of(root: Path) -> list[Path]:
    return sorted(root.rglob("*.json.gz"))
