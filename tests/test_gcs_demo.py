"""The GCS demo export loads cleanly and holds every kind of traffic the AWS demo has."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from sentinel.config import GcsAuditSource
from sentinel.objects import load_inventory
from sentinel.sources import gcs_demo
from sentinel.sources.gcs import run_export
from sentinel.store import Store
from tests.gcs_fixtures import fresh_logs  # noqa: F401  (autouse fixture)


def test_demo_export_loads_with_expected_traffic(store: Store, tmp_path: Path) -> None:
    export = gcs_demo.write_demo_export(tmp_path / "sink", dt.date(2025, 3, 3), days=2, seed=1)
    again = gcs_demo.write_demo_export(tmp_path / "again", dt.date(2025, 3, 3), days=2, seed=1)
    assert (export.files, export.entries) == (again.files, again.entries)  # deterministic
    report = run_export(store, GcsAuditSource(), export.root, keep_raw="non_read")
    assert report.files_ignored == {"not_audit_export": 1}  # the manifest beside the logs
    assert (report.records_quarantined, report.events_duplicate) == (0, 1)
    assert report.events_loaded == export.entries - 1
    kinds = {
        (r["actor"], r["action"])
        for r in store.query("SELECT DISTINCT actor, action FROM access_events")
    }
    assert {
        (gcs_demo.HYDRATOR, "read"),
        (gcs_demo.TRAINER, "write"),
        (gcs_demo.PARTNER, "read"),
        ("alice@acme.example", "read"),
        ("bob.ops@acme.example", "tamper"),
        ("bob.ops@acme.example", "delete"),
        (None, "read"),
    } <= kinds
    sizes = load_inventory(store, export.manifest)
    # tokenizer.json (left out on purpose) and the eval results people read in the notebooks bucket
    assert sizes.estimate.objects_unknown_size == 2
    partner = store.scalar(
        "SELECT sum(bytes_out) FROM access_events WHERE actor = ?", [gcs_demo.PARTNER]
    )
    assert partner == gcs_demo.SHARDS * gcs_demo.SHARD_BYTES
