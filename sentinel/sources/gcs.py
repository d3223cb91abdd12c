"""GCS audit logs, from a Log Router sink export (a directory or file of LogEntry JSON lines) or
from the Cloud Logging API (``gcs_api``), loaded into ``access_events``.

Both paths hand local NDJSON files to the same ``Loader`` with ``GcsAuditFormat``; after each
batch, inside its transaction, object sizes from ``storage.objects.create`` responses go to
``objects`` and the batch's reads get their estimated ``bytes_out`` (``sentinel.objects``).

Sink exports are laid out as ``cloudaudit.googleapis.com/{data_access,activity}/YYYY/MM/DD/
<HH:MM:SS>_<HH:MM:SS>_S<n>.json``; every file is read once (``source_files``), so re-running over
a growing directory loads only new files, and duplicate entries across files collapse on the
``logName|timestamp|insertId`` key.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sentinel import logs
from sentinel.config import GcsAuditSource
from sentinel.errors import SourceError
from sentinel.ingest import IngestReport, InputFile, KeepRaw, Loader, batches, new_uris
from sentinel.objects import EstimateReport, estimate_bytes, sizes_from_events
from sentinel.sources.gcs_sql import GcsAuditFormat
from sentinel.store import Store

log = logs.get(__name__)

_BATCH_FILES = 64
EXPORT_FILE = re.compile(
    r"(?:^|/)cloudaudit\.googleapis\.com/(?P<log>[a-z_]+)/(?P<y>\d{4})/(?P<m>\d{2})/(?P<d>\d{2})/"
    r"[^/]+\.json(?:l)?(?:\.gz)?$"
)
LOGS = ("data_access", "activity")


@dataclass
class GcsIngestReport(IngestReport):
    """``IngestReport`` plus what only GCS has: API windows and requests, and byte estimates."""

    windows: int = 0
    api_requests: int = 0
    api_retries: int = 0
    object_sizes_from_events: int = 0
    estimate: EstimateReport = field(default_factory=EstimateReport)

    def as_dict(self) -> dict[str, object]:
        base = super().as_dict()
        base.update(
            windows=self.windows,
            api_requests=self.api_requests,
            api_retries=self.api_retries,
            object_sizes_from_events=self.object_sizes_from_events,
            **self.estimate.as_dict(),
        )
        return base


def watched_buckets(source: GcsAuditSource, default: tuple[str, ...]) -> tuple[str, ...]:
    return source.buckets or default


def make_loader(
    store: Store,
    source_label: str,
    buckets: tuple[str, ...],
    keep_raw: KeepRaw,
    report: GcsIngestReport,
    on_commit: Callable[[Store, list[InputFile]], None] | None = None,
) -> Loader:
    """A ``Loader`` whose every batch also records object sizes and estimates read bytes."""

    def after_batch(db: Store, files: list[InputFile]) -> None:
        load_id = int(db.columns_and_rows("SELECT max(load_id) FROM loads")[1][0][0])
        report.object_sizes_from_events += sizes_from_events(db, load_id)
        if on_commit:
            on_commit(db, files)

    return Loader(store, GcsAuditFormat(buckets), source=source_label, keep_raw=keep_raw,
                  report=report, on_commit=after_batch)  # fmt: skip


def last_load_id(store: Store) -> int:
    return int(store.columns_and_rows("SELECT coalesce(max(load_id), 0) FROM loads")[1][0][0])


def finish(store: Store, report: GcsIngestReport, since_load_id: int) -> None:
    """Estimate bytes of the reads this run loaded, and refill reads whose size was unknown.
    Runs once per run (not per batch: it rescans the affected groups); idempotent, so a crash
    before it only delays the estimate to the next run, which refills unknown reads."""
    with store.transaction():
        report.estimate = estimate_bytes(store, since_load_id, refill_unknown=True)


# -- sink exports -----------------------------------------------------------------------------
def run_export(
    store: Store,
    source: GcsAuditSource,
    path: Path,
    *,
    keep_raw: KeepRaw,
    buckets: tuple[str, ...] = (),
    since: dt.date | None = None,
    until: dt.date | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> GcsIngestReport:
    """Load new files of a sink export directory (or one NDJSON file)."""
    root = path.resolve()
    label = source.name or str(root)
    report = GcsIngestReport(source=label)
    listed = list(_list_export(root, since, until, report))
    fresh = new_uris(store, [str(p) for p, _ in listed])
    todo = [(p, meta) for p, meta in listed if str(p) in fresh]
    report.files_new = len(todo)
    log.info("ingest.listed", source=label, listed=report.files_listed, new=len(todo),
             ignored=sum(report.files_ignored.values()))  # fmt: skip
    backfill = since is not None or until is not None
    cursor_key = f"gcs:{label}"

    def commit_cursor(db: Store, files: list[InputFile]) -> None:
        if backfill:
            return
        newest: dict[str, str] = {}
        for f in files:
            if "day" in f.meta:
                newest[f.meta["log"]] = max(newest.get(f.meta["log"], ""), f.meta["day"])
        for log_name, day in sorted(newest.items()):
            db.execute(
                "INSERT INTO cursors VALUES (?, ?, ?, now()::TIMESTAMP) ON CONFLICT"
                " (source, key) DO UPDATE SET value = greatest(cursors.value,"
                " excluded.value), updated_at = excluded.updated_at",
                [cursor_key, log_name, day],
            )

    loader = make_loader(store, label, buckets, keep_raw, report, commit_cursor)
    since_load_id = last_load_id(store)
    done = 0
    try:
        with tempfile.TemporaryDirectory(prefix="sentinel-gcs-") as spool:
            inputs = (_local_input(p, meta, Path(spool)) for p, meta in todo)
            for batch in batches(inputs, _BATCH_FILES):
                loader.load(batch)
                for f in batch:
                    if f.path.parent == Path(spool):
                        f.path.unlink(missing_ok=True)
                done += len(batch)
                if progress:
                    progress(done, len(todo))
    except BaseException:
        with contextlib.suppress(Exception):  # keep what committed estimated; re-raise the cause
            finish(store, report, since_load_id)
        raise
    finish(store, report, since_load_id)
    log.info("ingest.done", **report.as_dict())
    return report


def _list_export(
    root: Path, since: dt.date | None, until: dt.date | None, report: GcsIngestReport
) -> Iterator[tuple[Path, dict[str, str]]]:
    if root.is_file():
        report.files_listed += 1
        yield root, {}
        return
    if not root.is_dir():
        raise SourceError(
            f"no such file or directory: {root}",
            hint="pass --path with a sink export directory or an NDJSON file of LogEntry JSON",
        )
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            full = Path(dirpath) / name
            report.files_listed += 1
            match = EXPORT_FILE.search(full.as_posix())
            if not match:
                report.ignore("not_audit_export")
                continue
            if match["log"] not in LOGS:
                report.ignore(f"log_{match['log']}")
                continue
            try:
                day = dt.date(int(match["y"]), int(match["m"]), int(match["d"]))
            except ValueError:
                report.ignore("not_audit_export")
                continue
            if (since and day < since) or (until and day > until):
                report.ignore("outside_window")
                continue
            if full.stat().st_size == 0:
                report.ignore("empty_file")
                continue
            yield full, {"log": match["log"], "day": day.isoformat()}


def _local_input(path: Path, meta: dict[str, str], spool: Path) -> InputFile:
    """Gzipped exports are inflated into the spool: DuckDB reads the lines as plain text."""
    with path.open("rb") as handle:
        gzipped = handle.read(2) == b"\x1f\x8b"
    readable = path
    if gzipped:
        inflated = spool / f"{abs(hash(str(path))):x}-{path.name}.ndjson"
        try:
            with gzip.open(path, "rb") as src, inflated.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1024 * 1024)
            readable = inflated
        except (OSError, EOFError):
            # Corrupt gzip: hand DuckDB the compressed bytes under a name it will not inflate;
            # it refuses them as text and the loader quarantines the whole file.
            readable = spool / f"{abs(hash(str(path))):x}-{path.name}.corrupt-gzip"
            shutil.copyfile(path, readable)
            inflated.unlink(missing_ok=True)
    return InputFile(uri=str(path), path=readable, size=path.stat().st_size,
                     compression="none", meta=meta)  # fmt: skip
