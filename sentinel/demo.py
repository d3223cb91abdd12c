"""``sentinel demo``: weeks of realistic local data, the whole pipeline, and what it found.

Everything lives under one directory (default ``./demo``): the generated trail bucket copy, a
``sentinel.toml`` pointing at it, and the DuckDB file. Rerunning starts from scratch.
"""

from __future__ import annotations

import datetime as dt
import importlib.resources
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentinel import config as config_mod
from sentinel import logs
from sentinel.ingest import IngestReport
from sentinel.sources import cloudtrail
from sentinel.store import Store
from sentinel.synth import Scenario, write_trail

log = logs.get(__name__)


@dataclass
class DemoResult:
    directory: Path
    config_path: Path
    db_path: Path
    generated: dict[str, int]
    ingest: IngestReport
    summary: dict[str, Any]


def run(
    directory: Path, *, days: int = 21, seed: int = 7, today: dt.date | None = None
) -> DemoResult:
    directory = directory.resolve()
    trail = directory / "trail"
    db_path = directory / "sentinel.duckdb"
    for stale in (trail, db_path, Path(f"{db_path}.wal")):
        if stale.is_dir():
            shutil.rmtree(stale)
        elif stale.exists():
            stale.unlink()
    directory.mkdir(parents=True, exist_ok=True)
    end = dt.datetime.combine(today or dt.datetime.now(dt.UTC).date(), dt.time())
    scenario = Scenario(start=end - dt.timedelta(days=days), days=days, seed=seed, incidents=True)
    generated = write_trail(trail, scenario)
    log.info("demo.generated", directory=str(directory), **generated)

    template = importlib.resources.files("sentinel").joinpath("demo_config.toml").read_text()
    config_path = directory / "sentinel.toml"
    config_path.write_text(
        template.replace("@DB@", db_path.as_posix()).replace("@TRAIL@", trail.as_posix())
    )
    cfg = config_mod.load(config_path, {})
    with Store.open(
        db_path, memory_limit=cfg.store.memory_limit, threads=cfg.store.threads
    ) as store:
        # Late files land in later day folders: a first-time load reads the whole copy.
        report = cloudtrail.run(store, cfg.sources.cloudtrail[0], keep_raw=cfg.store.keep_raw)
        summary = summarize(store)
    return DemoResult(directory, config_path, db_path, generated, report, summary)


def summarize(store: Store) -> dict[str, Any]:
    return {
        "events": store.scalar("SELECT count(*) FROM access_events"),
        "first_event": store.scalar("SELECT min(event_time) FROM access_events"),
        "last_event": store.scalar("SELECT max(event_time) FROM access_events"),
        "by_action": dict(
            store.columns_and_rows(
                "SELECT action, count(*) FROM access_events GROUP BY 1 ORDER BY 2 DESC"
            )[1]
        ),
        "top_readers": store.query(
            "SELECT actor, round(sum(bytes) / 1024^3, 1) AS gib_read, sum(objects) AS objects"
            " FROM v_bytes_by_actor_hour GROUP BY actor ORDER BY gib_read DESC LIMIT 5"
        ),
        "quarantined": store.scalar("SELECT count(*) FROM quarantine"),
    }
