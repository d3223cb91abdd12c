"""``sentinel demo``: weeks of realistic local data, the whole pipeline, and what it found.

Everything lives under one directory (default ``./demo``): a generated CloudTrail bucket copy, a
GCS audit-log sink export, object-size manifests, a ``sentinel.toml`` pointing at them, and the
DuckDB file. The data holds one planted incident per detection rule and a few leaks in
inference-server logs; the rest is routine traffic that must stay quiet. Rerunning starts over.
"""

from __future__ import annotations

import datetime as dt
import importlib.resources
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentinel import config as config_mod
from sentinel import demo_logs, detect, fingerprint, logs, objects, scan
from sentinel.ingest import IngestReport
from sentinel.sources import cloudtrail, gcs, gcs_demo
from sentinel.store import Store
from sentinel.synth import MODELS, SHARD_BYTES, WEIGHTS, Scenario, write_trail

log = logs.get(__name__)


@dataclass
class DemoResult:
    directory: Path
    config_path: Path
    db_path: Path
    generated: dict[str, int]
    ingest: list[IngestReport]
    summary: dict[str, Any]

    @property
    def partial(self) -> bool:
        return any(r.partial for r in self.ingest)


def run(
    directory: Path, *, days: int = 21, seed: int = 7, today: dt.date | None = None
) -> DemoResult:
    directory = directory.resolve()
    trail, sink = directory / "trail", directory / "gcs-sink"
    db_path = directory / "sentinel.duckdb"
    for stale in (trail, sink, db_path, Path(f"{db_path}.wal")):
        if stale.is_dir():
            shutil.rmtree(stale)
        elif stale.exists():
            stale.unlink()
    directory.mkdir(parents=True, exist_ok=True)
    end = dt.datetime.combine(today or dt.datetime.now(dt.UTC).date(), dt.time())
    start = end - dt.timedelta(days=days)
    scenario = Scenario(start=start, days=days, seed=seed, incidents=True)
    generated = write_trail(trail, scenario)
    export = gcs_demo.write_demo_export(sink, start.date(), days, seed)
    aws_manifest = _write_aws_manifest(directory / "aws-objects.csv")
    generated.update(gcs_files=export.files, gcs_entries=export.entries)
    log.info("demo.generated", directory=str(directory), **generated)

    template = importlib.resources.files("sentinel").joinpath("demo_config.toml").read_text()
    config_path = directory / "sentinel.toml"
    config_path.write_text(
        template.replace("@DB@", db_path.as_posix())
        .replace("@TRAIL@", trail.as_posix())
        .replace("@GCS@", sink.as_posix())
    )
    cfg = config_mod.load(config_path, {})
    with Store.open(
        db_path, memory_limit=cfg.store.memory_limit, threads=cfg.store.threads
    ) as store:
        reports: list[IngestReport] = [
            cloudtrail.run(store, cfg.sources.cloudtrail[0], keep_raw=cfg.store.keep_raw),
            gcs.run_export(store, cfg.sources.gcs_audit[0], sink, keep_raw=cfg.store.keep_raw),
        ]
        objects.load_inventory(store, aws_manifest, provider="aws")
        objects.load_inventory(store, export.manifest)
        detected = detect.run_detect(store, cfg, now=end)
        settings = scan.Settings(fingerprint_key=fingerprint.DEMO_KEY)
        leaks = scan.record_entries(
            store,
            cfg,
            demo_logs.demo_entries(end, seed=seed),
            settings,
            source="demo-loki",
            tenant="inference",
            now=end,
        )
        summary = summarize(store)
        summary["rules_failed"] = [o.rule_id for o in detected.outcomes if o.error]
        summary["leak_findings"] = leaks
    return DemoResult(directory, config_path, db_path, generated, reports, summary)


def _write_aws_manifest(path: Path) -> Path:
    """Object sizes of the AWS weights, as an inventory export would give them."""
    rows = ["bucket,key,size"]
    for team, models in MODELS.items():
        for model in models:
            prefix = f"models/{team}/{model}"
            rows.append(f"{WEIGHTS},{prefix}/config.json,2048")
            rows.extend(
                f"{WEIGHTS},{prefix}/model-{i:05d}-of-00030.safetensors,{SHARD_BYTES}"
                for i in range(1, 31)
            )
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def summarize(store: Store) -> dict[str, Any]:
    return {
        "events": store.scalar("SELECT count(*) FROM access_events"),
        "events_by_provider": dict(
            store.columns_and_rows(
                "SELECT provider, count(*) FROM access_events GROUP BY 1 ORDER BY 1"
            )[1]
        ),
        "first_event": store.scalar("SELECT min(event_time) FROM access_events"),
        "last_event": store.scalar("SELECT max(event_time) FROM access_events"),
        "quarantined": store.scalar("SELECT count(*) FROM quarantine"),
        "findings_by_severity": dict(
            store.columns_and_rows(
                "SELECT severity, count(*) FROM findings GROUP BY 1"
                " ORDER BY list_position(['critical','high','medium','low','info'], severity)"
            )[1]
        ),
        "findings": store.query(
            "SELECT severity, rule_id, title FROM v_open_findings WHERE severity <> 'info'"
        ),
        "suppressed": store.scalar("SELECT count(*) FROM findings WHERE status = 'suppressed'"),
    }
