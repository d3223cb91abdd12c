"""Load batches of log files into ``access_events``: once, atomically, with bad input quarantined.

The loader is format-agnostic. A ``RecordFormat`` turns local files into a *stage* query (one row
per record, with the ``access_events`` columns plus ``bad_reason`` and ``skip``); the loader then,
in ONE transaction per batch: writes quarantine rows for bad records and bad files, inserts new
events (deduplicated against the batch and the table), registers every file in ``source_files``,
records the load, and moves the caller's cursor. Killing the process at any point therefore loses
nothing and duplicates nothing: an uncommitted batch is simply read again on the next run.

Two paths share those guarantees. When every file's record count is known up front (CloudTrail
files split in Python), a batch is inserted in one pass straight from the stage query; a record
that needs quarantine aborts that statement and the batch takes the staged path, which
materializes the stage query once and quarantines record by record. A batch that DuckDB cannot
read as a whole is retried file by file, so one bad file is quarantined while the rest lands.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from sentinel import logs
from sentinel.errors import StoreError
from sentinel.store import Store
from sentinel.timeutil import utcnow

log = logs.get(__name__)

KeepRaw = Literal["all", "non_read", "none"]

EVENT_COLUMNS = (
    "provider",
    "event_id",
    "logical_id",
    "event_time",
    "account",
    "region",
    "actor",
    "actor_type",
    "actor_session",
    "caller_account",
    "invoked_by",
    "operation",
    "action",
    "is_service_event",
    "bucket",
    "object_key",
    "copy_source",
    "bytes_out",
    "bytes_in",
    "bytes_estimated",
    "error_code",
    "src_ip",
    "user_agent",
    "vpce_id",
    "source_uri",
    "load_id",
    "source_index",
    "raw",
)
_MAX_BATCH_BYTES = 64 * 1024 * 1024  # compressed bytes per batch (~0.5-1 GB of JSON)
_EXCERPT_CHARS = 2000
# Raised inside the one-pass insert when a row needs quarantine; the staged path takes over.
_NEEDS_STAGING = "sentinel: batch needs staging"
# DuckDB errors that mean "this input cannot be read", as opposed to resource or internal errors.
_BAD_INPUT_ERRORS = frozenset(
    {"InvalidInputException", "IOException", "ConversionException", "SerializationException"}
)


@dataclass(frozen=True)
class InputFile:
    """A file to load: ``uri`` is its stable identity (s3://, gs:// or an absolute path),
    ``path`` where it can be read locally now, ``meta`` facts from its name (account, region).
    ``unreadable`` = (reason, detail) marks a file a format's pre-processing could not read at
    all; the loader quarantines it whole."""

    uri: str
    path: Path
    size: int
    compression: Literal["gzip", "none"]
    meta: dict[str, str] = field(default_factory=dict)
    unreadable: tuple[str, str] | None = None


class RecordFormat(Protocol):
    provider: str

    def stage_query(self, files_view: str, files: Sequence[InputFile]) -> str:
        """SQL producing one row per record of ``files`` with columns: every
        ``EVENT_COLUMNS`` entry except ``load_id`` and ``raw``, plus ``record`` (JSON of the
        original record), ``bad_reason`` (NULL when valid), ``skip`` (valid but not an
        object-storage record), and ``envelope_ok`` (false marks a file without its envelope).
        ``files_view`` is a registered view (path, uri, account, region) of the batch."""
        ...


@dataclass
class IngestReport:
    source: str
    files_listed: int = 0
    files_new: int = 0
    files_loaded: int = 0
    files_quarantined: int = 0
    files_ignored: dict[str, int] = field(default_factory=dict)
    events_loaded: int = 0
    events_duplicate: int = 0
    records_skipped: int = 0
    records_quarantined: int = 0
    seconds: float = 0.0

    @property
    def partial(self) -> bool:
        return bool(self.files_quarantined or self.records_quarantined)

    def ignore(self, reason: str) -> None:
        self.files_ignored[reason] = self.files_ignored.get(reason, 0) + 1

    def as_dict(self) -> dict[str, object]:
        rate = self.events_loaded / self.seconds if self.seconds else 0.0
        return {
            "source": self.source,
            "files_listed": self.files_listed,
            "files_new": self.files_new,
            "files_loaded": self.files_loaded,
            "files_quarantined": self.files_quarantined,
            "files_ignored": sum(self.files_ignored.values()),
            "files_ignored_by_reason": dict(sorted(self.files_ignored.items())),
            "events_loaded": self.events_loaded,
            "events_duplicate": self.events_duplicate,
            "records_skipped": self.records_skipped,
            "records_quarantined": self.records_quarantined,
            "seconds": round(self.seconds, 3),
            "events_per_second": round(rate),
        }


def new_uris(store: Store, uris: Sequence[str]) -> set[str]:
    """The subset of ``uris`` not yet recorded in ``source_files`` (loaded or quarantined)."""
    if not uris:
        return set()
    import polars as pl

    store.register("_candidate_uris", pl.DataFrame({"uri": list(uris)}))
    try:
        _, rows = store.columns_and_rows(
            "SELECT c.uri FROM _candidate_uris c ANTI JOIN source_files s ON s.uri = c.uri"
        )
    finally:
        store.unregister("_candidate_uris")
    return {r[0] for r in rows}


def batches(
    files: Iterable[InputFile],
    max_files: int,
    max_bytes: int = _MAX_BATCH_BYTES,
    first_bytes: int | None = None,
    weight: Callable[[InputFile], int] | None = None,
) -> Iterator[list[InputFile]]:
    """Group files so each DuckDB read spreads over threads but stays within memory. Files weigh
    their size unless ``weight`` says otherwise. ``first_bytes`` caps the first batch only: when
    files are prepared ahead of the loader, a small first batch gets the database going sooner."""
    batch: list[InputFile] = []
    size = 0
    limit = first_bytes or max_bytes
    for f in files:
        w = weight(f) if weight else f.size
        if batch and (len(batch) >= max_files or size + w > limit):
            yield batch
            batch, size, limit = [], 0, max_bytes
        batch.append(f)
        size += w
    if batch:
        yield batch


@dataclass(frozen=True)
class _Tally:
    valid: int
    skipped: int
    bad_records: int
    first_time: dt.datetime | None
    last_time: dt.datetime | None
    bad_files: set[str]
    batch_duplicates: int


class Loader:
    """Commits batches of one source. ``on_commit`` runs inside each batch's transaction
    (cursor updates belong there, so they commit with the rows they describe)."""

    def __init__(
        self,
        store: Store,
        fmt: RecordFormat,
        *,
        source: str,
        keep_raw: KeepRaw,
        report: IngestReport,
        on_commit: Callable[[Store, list[InputFile]], None] | None = None,
    ) -> None:
        self.store = store
        self.fmt = fmt
        self.source = source
        self.keep_raw = keep_raw
        self.report = report
        self.on_commit = on_commit

    def load(self, batch: list[InputFile]) -> None:
        """Commit one batch. Files already known to be unreadable are quarantined in the same
        transaction as the rest, so the cursor never passes a file that did not commit."""
        started = time.perf_counter()
        try:
            self._load_guarded(batch)
        finally:
            self.report.seconds += time.perf_counter() - started

    def _load_guarded(self, batch: list[InputFile]) -> None:
        readable = [f for f in batch if not f.unreadable]
        unreadable = [f for f in batch if f.unreadable]
        if not readable:
            self._quarantine_files(unreadable)
            return
        try:
            if not (_counted(readable) and self._load_direct(readable, unreadable)):
                self._load_batch(readable, unreadable)
        except StoreError as exc:
            if exc.kind not in _BAD_INPUT_ERRORS:
                raise  # memory, disk or a bug: not the input's fault, so quarantine nothing
            if len(batch) == 1:
                reason = (_read_failure_reason(str(exc)), str(exc))
                self._quarantine_files([dataclasses.replace(batch[0], unreadable=reason)])
                return
            log.info(
                "ingest.batch_split", source=self.source, files=len(batch), error=str(exc)[:300]
            )
            for one in batch:  # in order, so each commit moves the cursor past loaded files only
                self._load_guarded([one])

    # -- the common case: one pass, straight into access_events ------------------------------
    def _load_direct(self, batch: list[InputFile], unreadable: list[InputFile]) -> bool:
        """Insert the batch's valid rows straight from the stage query, in one transaction.

        Needs each file's record count up front (the files were split in Python), so that
        records of other services are counted without being kept. A bad record aborts the
        statement and rolls everything back; the batch then takes the staged path, which
        quarantines record by record. Returns whether the batch was committed."""
        store = self.store
        columns = ", ".join(c for c in EVENT_COLUMNS if c not in ("load_id", "raw"))
        store.register("_batch_files", _files_frame(batch))
        # With filter pushdown the WHERE moves below the projection and every extracted field is
        # computed twice (much slower); without it the WHERE reads the projected rows.
        store.disable_optimizer("filter_pushdown")
        pushdown_off = True
        try:
            with store.transaction():
                load_id = store.next_id("load_seq")
                now = utcnow()
                store.execute(
                    f"INSERT INTO access_events ({columns}, load_id, raw)"
                    f" SELECT {columns}, ?, CASE WHEN {self._keep_raw_condition()}"
                    " THEN record END"
                    f" FROM ({self.fmt.stage_query('_batch_files', batch)})"
                    " WHERE CASE WHEN bad_reason IS NOT NULL OR NOT envelope_ok"
                    f" THEN error('{_NEEDS_STAGING}') ELSE NOT skip END",
                    [load_id],
                )
                store.disable_optimizer(None)  # the queries below need pushdown for zone maps
                pushdown_off = False
                valid = self._events_per_file(load_id)
                duplicates = self._drop_duplicates(load_id)
                events = self._events_per_file(load_id) if duplicates else valid
                skipped = {f.uri: int(f.meta["records"]) - valid.get(f.uri, 0) for f in batch}
                self._register_counted(batch, events, skipped, load_id, now)
                inserted = sum(events.values())
                self._finish_load(batch, unreadable, load_id, now, events=inserted, quarantined=0)
        except StoreError as exc:
            # A record to quarantine (our error()), or input DuckDB cannot read: either way the
            # staged path decides, record by record or file by file.
            if exc.kind not in _BAD_INPUT_ERRORS:
                raise
            log.debug(
                "ingest.batch_needs_staging",
                source=self.source,
                files=len(batch),
                error=exc.message[:300],
            )
            return False
        finally:
            if pushdown_off:  # the transaction is over (rolled back), so this cannot fail on it
                store.disable_optimizer(None)
            store.unregister("_batch_files")
        self._report_unreadable(unreadable)
        report = self.report
        report.files_loaded += len(batch)
        report.events_loaded += inserted
        report.events_duplicate += duplicates
        report.records_skipped += sum(skipped.values())
        log.debug(
            "ingest.batch_loaded",
            source=self.source,
            files=len(batch),
            events=inserted,
            duplicates=duplicates,
            load_id=load_id,
        )
        return True

    def _register_counted(
        self,
        batch: list[InputFile],
        events: dict[str, int],
        skipped: dict[str, int],
        load_id: int,
        now: dt.datetime,
    ) -> None:
        import polars as pl

        registry = pl.DataFrame(
            {
                "uri": [f.uri for f in batch],
                "size": [f.size for f in batch],
                "events": [events.get(f.uri, 0) for f in batch],
                "skipped": [skipped[f.uri] for f in batch],
            },
            schema={"uri": pl.String, "size": pl.Int64, "events": pl.Int64, "skipped": pl.Int64},
        )
        self.store.register("_registry", registry)
        try:
            self.store.execute(
                "INSERT INTO source_files"
                " SELECT ?, ?, uri, size, 'loaded', events, skipped, 0, ?, ? FROM _registry",
                [self.fmt.provider, self.source, load_id, now],
            )
        finally:
            self.store.unregister("_registry")

    def _events_per_file(self, load_id: int) -> dict[str, int]:
        _, rows = self.store.columns_and_rows(
            "SELECT source_uri, count(*) FROM access_events WHERE load_id = ? GROUP BY 1",
            [load_id],
        )
        return {uri: int(n) for uri, n in rows}

    def _drop_duplicates(self, load_id: int) -> int:
        """Delete rows of load ``load_id`` whose event is already stored, or repeated within the
        load (the first by file and position stays). Duplicates share their event id and event
        time, so the search for older copies is limited to the load's time range, which zone
        maps turn into a scan of a few row groups."""
        store = self.store
        first, last, repeated = store.columns_and_rows(
            "SELECT min(event_time), max(event_time), count(*) - count(DISTINCT event_id)"
            " FROM access_events WHERE load_id = ?",
            [load_id],
        )[1][0]
        if first is None:
            return 0
        dropped = 0
        if repeated:
            dropped += store.execute_count(
                "DELETE FROM access_events WHERE rowid IN (SELECT rowid FROM ("
                "  SELECT rowid, row_number() OVER (PARTITION BY provider, event_id"
                "    ORDER BY source_uri, source_index) AS copy"
                "  FROM access_events WHERE load_id = ?) WHERE copy > 1)",
                [load_id],
            )
        dropped += store.execute_count(
            "DELETE FROM access_events WHERE rowid IN ("
            " SELECT n.rowid FROM access_events n JOIN access_events o"
            "   ON o.provider = n.provider AND o.event_id = n.event_id"
            " WHERE n.load_id = ? AND o.load_id <> ? AND o.event_time BETWEEN ? AND ?)",
            [load_id, load_id, first, last],
        )
        return dropped

    # -- one batch, one transaction ---------------------------------------------------------
    def _load_batch(self, batch: list[InputFile], unreadable: list[InputFile]) -> None:
        store = self.store
        store.register("_batch_files", _files_frame(batch))
        try:
            with store.transaction():
                load_id = store.next_id("load_seq")
                now = utcnow()
                # The original record is carried only where it may be stored: rows the raw policy
                # keeps and rows headed for quarantine. Copying every record costs more than
                # parsing it.
                store.execute(
                    "CREATE OR REPLACE TEMP TABLE _stage AS SELECT * REPLACE ("
                    f" CASE WHEN bad_reason IS NOT NULL OR ({self._keep_raw_condition()})"
                    " THEN record END AS record)"
                    f" FROM ({self.fmt.stage_query('_batch_files', batch)})"
                )
                tally = self._tally()
                if tally.bad_files:
                    self._quarantine_envelopes(tally.bad_files, load_id, now)
                if tally.bad_records:
                    self._quarantine_records(load_id, now)
                inserted = self._insert_events(load_id, tally) if tally.valid else 0
                self._register_files(load_id, now)
                self._finish_load(
                    batch,
                    unreadable,
                    load_id,
                    now,
                    events=inserted,
                    quarantined=len(tally.bad_files) + tally.bad_records,
                )
                store.execute("DROP TABLE _stage")
        finally:
            store.unregister("_batch_files")
        self._report_unreadable(unreadable)
        report = self.report
        report.files_loaded += len(batch) - len(tally.bad_files)
        report.files_quarantined += len(tally.bad_files)
        report.events_loaded += inserted
        report.events_duplicate += tally.valid - inserted
        report.records_skipped += tally.skipped
        report.records_quarantined += tally.bad_records
        log.debug(
            "ingest.batch_loaded",
            source=self.source,
            files=len(batch),
            events=inserted,
            duplicates=tally.valid - inserted,
            quarantined_records=tally.bad_records,
            load_id=load_id,
        )

    def _tally(self) -> _Tally:
        """Everything the batch needs to know about its stage, in one scan."""
        good = "envelope_ok AND bad_reason IS NULL"
        row = self.store.columns_and_rows(
            "SELECT"
            f" count(*) FILTER (WHERE {good} AND NOT skip),"
            f" count(*) FILTER (WHERE {good} AND skip),"
            " count(*) FILTER (WHERE envelope_ok AND bad_reason IS NOT NULL),"
            f" min(event_time) FILTER (WHERE {good} AND NOT skip),"
            f" max(event_time) FILTER (WHERE {good} AND NOT skip),"
            " list(DISTINCT source_uri) FILTER (WHERE NOT envelope_ok),"
            # Duplicates inside one batch are rare; the window that removes them is not cheap.
            f" count(event_id) FILTER (WHERE {good} AND NOT skip)"
            f"   - count(DISTINCT event_id) FILTER (WHERE {good} AND NOT skip)"
            " FROM _stage"
        )[1][0]
        return _Tally(
            int(row[0]),
            int(row[1]),
            int(row[2]),
            row[3],
            row[4],
            set(row[5] or []),
            int(row[6] or 0),
        )

    def _quarantine_envelopes(self, bad: set[str], load_id: int, now: dt.datetime) -> None:
        for uri in sorted(bad):
            self._quarantine_file_row(
                uri,
                "no_records_envelope",
                "file has no record envelope (e.g. a CloudTrail file without 'Records')",
                load_id,
                now,
            )

    def _quarantine_records(self, load_id: int, now: dt.datetime) -> None:
        self.store.execute(
            "INSERT INTO quarantine SELECT nextval('quarantine_seq'), ?, ?, source_uri,"
            " source_index, split_part(bad_reason, ':', 1), bad_reason,"
            f" left(record::VARCHAR, {_EXCERPT_CHARS}), ?, ?"
            " FROM _stage WHERE envelope_ok AND bad_reason IS NOT NULL",
            [self.fmt.provider, self.source, load_id, now],
        )

    def _insert_events(self, load_id: int, tally: _Tally) -> int:
        columns = [c for c in EVENT_COLUMNS if c not in ("load_id", "raw")]
        select = ", ".join(f"s.{c}" for c in columns)
        dedupe = (
            "QUALIFY row_number() OVER"
            " (PARTITION BY event_id ORDER BY source_uri, source_index) = 1"
            if tally.batch_duplicates
            else ""
        )
        # Duplicates share their event id (and so their event time): restricting the anti-join to
        # the batch's time range keeps it a zone-map-pruned scan instead of a full-table one.
        return self.store.execute_count(
            f"INSERT INTO access_events ({', '.join(columns)}, load_id, raw) "
            f"SELECT {select}, ?, s.record "
            "FROM (SELECT * FROM _stage WHERE envelope_ok AND bad_reason IS NULL AND NOT skip"
            f"      {dedupe}) s "
            "WHERE NOT EXISTS (SELECT 1 FROM access_events e WHERE e.provider = s.provider"
            "   AND e.event_id = s.event_id AND e.event_time BETWEEN ? AND ?)",
            [load_id, tally.first_time, tally.last_time],
        )

    def _keep_raw_condition(self) -> str:
        if self.keep_raw == "all":
            return "true"
        if self.keep_raw == "none":
            return "false"
        # Default: keep every record except successful reads, metadata and list calls: they are
        # the bulk of the volume and stay re-readable from the immutable source files.
        return "NOT (action IN ('read', 'metadata', 'list') AND error_code IS NULL)"

    def _register_files(self, load_id: int, now: dt.datetime) -> None:
        self.store.execute(
            "INSERT INTO source_files SELECT ?, ?, b.uri, b.size,"
            " CASE WHEN coalesce(c.envelope_ok, true) THEN 'loaded' ELSE 'quarantined' END,"
            " coalesce(e.events, 0), coalesce(c.skipped, 0), coalesce(c.bad, 0), ?, ?"
            " FROM _batch_files b LEFT JOIN ("
            "   SELECT source_uri, bool_and(envelope_ok) AS envelope_ok,"
            "     count(*) FILTER (WHERE envelope_ok AND bad_reason IS NULL AND skip) AS skipped,"
            "     count(*) FILTER (WHERE envelope_ok AND bad_reason IS NOT NULL) AS bad"
            "   FROM _stage GROUP BY source_uri) c ON c.source_uri = b.uri"
            # Events actually stored (duplicates of stored events are not counted twice).
            " LEFT JOIN (SELECT source_uri, count(*) AS events FROM access_events"
            "   WHERE load_id = ? GROUP BY source_uri) e ON e.source_uri = b.uri",
            [self.fmt.provider, self.source, load_id, now, load_id],
        )

    # -- files that cannot be read at all ----------------------------------------------------
    def _quarantine_files(self, files: list[InputFile]) -> None:
        """Quarantine unreadable files (``unreadable`` set) in a transaction of their own."""
        now = utcnow()
        with self.store.transaction():
            load_id = self.store.next_id("load_seq")
            self._finish_load([], files, load_id, now, events=0, quarantined=0)
        self._report_unreadable(files)

    def _finish_load(
        self,
        loaded: list[InputFile],
        unreadable: list[InputFile],
        load_id: int,
        now: dt.datetime,
        *,
        events: int,
        quarantined: int,
    ) -> None:
        """Close a load inside its transaction: quarantine the unreadable files, record the load
        (``quarantined`` counts what was quarantined besides them), and let the caller move its
        cursor over every file of the load."""
        self._write_unreadable(unreadable, load_id, now)
        files = [*loaded, *unreadable]
        self.store.execute(
            "INSERT INTO loads VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                load_id,
                self.fmt.provider,
                self.source,
                now,
                len(files),
                events,
                quarantined + len(unreadable),
            ],
        )
        if self.on_commit:
            self.on_commit(self.store, files)

    def _write_unreadable(self, files: list[InputFile], load_id: int, now: dt.datetime) -> None:
        """Quarantine and registry rows for whole unreadable files, in the caller's transaction."""
        for f in files:
            reason, detail = f.unreadable or ("unreadable", "")
            self._quarantine_file_row(f.uri, reason, detail[:1000], load_id, now)
            self.store.execute(
                "INSERT INTO source_files VALUES (?, ?, ?, ?, 'quarantined', 0, 0, 0, ?, ?)",
                [self.fmt.provider, self.source, f.uri, f.size, load_id, now],
            )

    def _report_unreadable(self, files: list[InputFile]) -> None:
        for f in files:
            reason, detail = f.unreadable or ("unreadable", "")
            self.report.files_quarantined += 1
            log.warning(
                "ingest.file_quarantined",
                source=self.source,
                uri=f.uri,
                reason=reason,
                detail=detail[:300],
            )

    def _quarantine_file_row(
        self, uri: str, reason: str, detail: str, load_id: int, now: dt.datetime
    ) -> None:
        """A quarantine row for a whole file (no record index, no excerpt)."""
        self.store.execute(
            "INSERT INTO quarantine VALUES"
            " (nextval('quarantine_seq'), ?, ?, ?, NULL, ?, ?, NULL, ?, ?)",
            [self.fmt.provider, self.source, uri, reason, detail, load_id, now],
        )


def _counted(batch: Sequence[InputFile]) -> bool:
    """Whether every file's record count is known before loading (files split in Python)."""
    return all("records" in f.meta for f in batch)


def _files_frame(files: Sequence[InputFile]) -> object:
    import polars as pl

    return pl.DataFrame(
        {
            "path": [str(f.path) for f in files],
            "uri": [f.uri for f in files],
            "size": [f.size for f in files],
            "account": [f.meta.get("account") for f in files],
            "region": [f.meta.get("region") for f in files],
        },
        schema={
            "path": pl.String,
            "uri": pl.String,
            "size": pl.Int64,
            "account": pl.String,
            "region": pl.String,
        },
    )


def _read_failure_reason(message: str) -> str:
    text = message.lower()
    if "gzip" in text or "zlib" in text or "decompress" in text or "inflate" in text:
        return "corrupt_compression"
    if "json" in text or "malformed" in text or "unexpected" in text or "unicode" in text:
        return "malformed_json"
    return "unreadable"
