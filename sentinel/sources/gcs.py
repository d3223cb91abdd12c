"""GCS audit logs, from a Log Router sink export (a directory or file of LogEntry JSON lines) or
from the Cloud Logging API (``gcs_api``), loaded into ``access_events``.

Both paths hand local NDJSON files to the same ``Loader`` with ``GcsAuditFormat``. Inside each
batch's transaction, object sizes from ``storage.objects.create`` responses go to ``objects``;
after the run, the new reads get their estimated ``bytes_out`` (``sentinel.objects``).

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
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from sentinel import logs
from sentinel.config import GcsAuditSource
from sentinel.errors import SourceError
from sentinel.ingest import IngestReport, InputFile, KeepRaw, Loader, batches, new_uris
from sentinel.objects import EstimateReport, estimate_pending, sizes_from_events
from sentinel.sources.gcs_sql import GcsAuditFormat
from sentinel.store import Store

log = logs.get(__name__)

_BATCH_FILES = 64
# DuckDB holds each file's text whole while splitting it into lines (about 6x its size in
# memory): big files are split into parts, and a batch stops at _BATCH_BYTES.
PART_BYTES = 32 * 1024 * 1024
_BATCH_BYTES = 64 * 1024 * 1024
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
    """A ``Loader`` whose every batch also records the object sizes its creates reveal."""

    def after_batch(db: Store, files: list[InputFile]) -> None:
        load_id = int(db.columns_and_rows("SELECT max(load_id) FROM loads")[1][0][0])
        report.object_sizes_from_events += sizes_from_events(db, load_id)
        if on_commit:
            on_commit(db, files)

    return Loader(store, GcsAuditFormat(buckets), source=source_label, keep_raw=keep_raw,
                  report=report, on_commit=after_batch)  # fmt: skip


def finish(store: Store, report: GcsIngestReport) -> None:
    """Estimate bytes of the reads loaded since the last estimate (once per run, not per batch:
    it rescans the affected groups), refilling unknown sizes if this run learned sizes."""
    report.estimate = estimate_pending(store)


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
    part_bytes: int = PART_BYTES,
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
    done = 0
    try:
        with tempfile.TemporaryDirectory(prefix="sentinel-gcs-") as spool:
            inputs = (
                f
                for p, meta in todo
                for f in local_inputs(store, p, meta, Path(spool), part_bytes)
                if f.uri
            )
            for batch in input_batches(inputs):
                loader.load(batch)
                for f in batch:
                    if f.path.parent == Path(spool):
                        f.path.unlink(missing_ok=True)
                parts = sum(1 for f in batch if "#part=" in f.uri)
                report.files_loaded -= parts  # count files, not the parts they were split into
                done += len(batch) - parts
                if progress:
                    progress(done, len(todo))
    except BaseException:
        with contextlib.suppress(Exception):  # keep what committed estimated; re-raise the cause
            finish(store, report)
        raise
    finish(store, report)
    log.info("ingest.done", **report.as_dict())
    return report


class _Readable(Protocol):
    def read(self, size: int, /) -> bytes: ...


def input_batches(inputs: Iterator[InputFile]) -> Iterator[list[InputFile]]:
    return batches(inputs, _BATCH_FILES, _BATCH_BYTES)


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


def local_inputs(
    store: Store,
    path: Path,
    meta: dict[str, str],
    spool: Path,
    part_bytes: int = PART_BYTES,
    uri: str | None = None,
) -> Iterator[InputFile]:
    """The file as DuckDB will read it: plain files up to ``part_bytes`` as they are; bigger or
    gzipped ones inflated and split at line boundaries into spool parts (a sink file can reach
    3.5 GiB, and DuckDB holds a read text whole). Parts are ``<path>#part=<n>`` except the last,
    which carries the plain path, so a file counts as loaded only once all its parts are; a
    re-run after a crash skips the parts already committed. ``line_offset`` keeps
    ``source_index`` the line number in the original file. ``uri`` defaults to the path."""
    uri = uri or str(path)
    with path.open("rb") as handle:
        gzipped = handle.read(2) == b"\x1f\x8b"
    if not gzipped and path.stat().st_size <= part_bytes:
        yield InputFile(uri=uri, path=path, size=path.stat().st_size, compression="none",
                        meta=meta)  # fmt: skip
        return
    stem = f"{abs(hash(str(path))):x}-{path.name}"
    opener = gzip.open if gzipped else open
    pending: tuple[Path, int] | None = None
    number = 0
    try:
        with opener(path, "rb") as stream:
            for part in _split(stream, spool / stem, part_bytes):
                if pending:
                    number += 1
                    yield _part(store, meta, pending, f"{uri}#part={number}", final=False)
                pending = part
    except (OSError, EOFError, zlib.error):
        # Corrupt gzip: what inflated so far loads; the rest goes to DuckDB as the compressed
        # bytes under a name it will not inflate, which it refuses as text, so the loader
        # quarantines the file as unreadable.
        if pending:
            number += 1
            yield _part(store, meta, pending, f"{uri}#part={number}", final=False)
        bad = spool / f"{stem}.corrupt-gzip"
        shutil.copyfile(path, bad)
        pending = (bad, 0)
    if pending:
        yield _part(store, meta, pending, uri, final=True)


def _part(
    store: Store, meta: dict[str, str], part: tuple[Path, int], uri: str, *, final: bool
) -> InputFile:
    spooled, offset = part
    if not final and not new_uris(store, [uri]):
        spooled.unlink(missing_ok=True)
        return InputFile(uri="", path=spooled, size=0, compression="none")  # already loaded
    return InputFile(uri=uri, path=spooled, size=spooled.stat().st_size, compression="none",
                     meta={**meta, "line_offset": str(offset)})  # fmt: skip


def _split(stream: _Readable, prefix: Path, part_bytes: int) -> Iterator[tuple[Path, int]]:
    """Write ``stream`` to ``prefix.<n>`` files of about ``part_bytes``, cut after a newline;
    yields each part with the number of lines before it."""
    carry = b""
    lines_before = 0
    number = 0
    while True:
        chunk = stream.read(part_bytes)
        data = carry + chunk
        cut = len(data) if not chunk else data.rfind(b"\n") + 1
        if cut == 0 and chunk:
            carry = data  # one line longer than a part: keep reading
            continue
        if not data:
            return
        number += 1
        target = prefix.with_name(f"{prefix.name}.{number}")
        target.write_bytes(data[:cut])
        yield target, lines_before
        lines_before += data.count(b"\n", 0, cut)
        carry = data[cut:]
        if not chunk:
            return
