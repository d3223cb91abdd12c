"""CloudTrail log files, from an S3 bucket (boto3) or a local directory laid out like one.

Files are foldered by *delivery* day and arrive late, so each run re-lists the last
``lookback_days`` day folders of every account/region and loads only files not yet in
``source_files``. The cursor (last day listed, per account/region) moves only on regular runs;
``--since/--until`` backfills list a window of day folders without touching it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import os
import shutil
import tempfile
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from sentinel import logs
from sentinel.config import CloudTrailSource
from sentinel.errors import AccessDeniedError, SourceError
from sentinel.ingest import IngestReport, InputFile, KeepRaw, Loader, batches, new_uris
from sentinel.sources.cloudtrail_layout import EventKey, classify, day_prefix
from sentinel.sources.cloudtrail_records import (
    keep_large_buffers,
    split_ahead,
    spool_root,
    text_size,
)
from sentinel.sources.cloudtrail_sql import CloudTrailFormat
from sentinel.store import Store

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

log = logs.get(__name__)

GZIP_MAGIC = b"\x1f\x8b"
_FETCH_THREADS = 8
# JSON text per batch (the commit unit): ~0.5M events, several DuckDB row groups, so rows are
# compressed and written in parallel during the insert rather than at commit. Larger batches
# measured faster (fewer part-filled row groups), at the cost of spool space.
_BATCH_TEXT_BYTES = 1024 * 1024**2
# The first batch is small so DuckDB starts while the split threads fill the next one.
_FIRST_BATCH_TEXT_BYTES = 80 * 1024**2


@dataclass(frozen=True)
class Window:
    """Delivery days to list, inclusive. ``backfill`` windows never move cursors."""

    first: dt.date
    last: dt.date
    backfill: bool

    def days(self) -> Iterator[dt.date]:
        day = self.first
        while day <= self.last:
            yield day
            day += dt.timedelta(days=1)

    def contains(self, day: dt.date) -> bool:
        return self.first <= day <= self.last


@dataclass(frozen=True)
class Listed:
    key: EventKey
    uri: str
    size: int


def compression_of(path: Path) -> Literal["gzip", "none"]:
    """Gzip is decided by magic bytes: names and Content-Encoding are not trustworthy."""
    with path.open("rb") as handle:
        return "gzip" if handle.read(2) == GZIP_MAGIC else "none"


def run(
    store: Store,
    source: CloudTrailSource,
    *,
    keep_raw: KeepRaw,
    since: dt.date | None = None,
    until: dt.date | None = None,
    path_override: Path | None = None,
    today: dt.date | None = None,
    progress: Callable[[int, int], None] | None = None,
    s3_client: S3Client | None = None,
) -> IngestReport:
    """Load new CloudTrail files of one source; returns what happened."""
    label = str(path_override) if path_override else source.label
    report = IngestReport(source=label)
    today = today or dt.datetime.now(dt.UTC).date()
    reader: _Reader
    if path_override or source.path:
        reader = _LocalReader(Path(path_override or source.path).resolve())
    else:
        reader = _S3Reader(source, s3_client or make_s3_client(source))
    cursor_key = f"cloudtrail:{label}"
    listed = list(_list_new(store, reader, source, cursor_key, since, until, today, report))
    report.files_new = len(listed)
    log.info(
        "ingest.listed",
        source=label,
        listed=report.files_listed,
        new=len(listed),
        ignored=sum(report.files_ignored.values()),
    )
    backfill = since is not None or until is not None

    def commit_cursor(db: Store, files: list[InputFile]) -> None:
        if backfill:
            return
        # The newest delivery day loaded per account/region, committed with the rows. Listing
        # resumes from the oldest partition cursor minus the lookback, so late files are seen.
        newest: dict[str, str] = {}
        for f in files:
            partition = f"{f.meta['account']}/{f.meta['region']}"
            newest[partition] = max(newest.get(partition, ""), f.meta["day"])
        db.execute_many(
            "INSERT INTO cursors VALUES (?, ?, ?, now()::TIMESTAMP) ON CONFLICT (source, key)"
            " DO UPDATE SET value = greatest(cursors.value, excluded.value),"
            " updated_at = excluded.updated_at",
            [[cursor_key, partition, day] for partition, day in sorted(newest.items())],
        )

    loader = Loader(
        store,
        CloudTrailFormat(),
        source=label,
        keep_raw=keep_raw,
        report=report,
        on_commit=commit_cursor,
    )
    done = 0
    keep_large_buffers()
    with tempfile.TemporaryDirectory(prefix="sentinel-spool-", dir=spool_root()) as spool_dir:
        spool = Path(spool_dir)
        fetched = reader.fetch_all(listed, spool)
        split_files = split_ahead(fetched, spool, discard_originals=reader.downloads)
        # Closing stops the download and split threads before the spool is removed, whatever
        # ended the loop (an error, Ctrl-C).
        with contextlib.closing(split_files), contextlib.closing(fetched):
            for batch in batches(
                split_files,
                max(1, source.batch_files),
                _BATCH_TEXT_BYTES,
                first_bytes=_FIRST_BATCH_TEXT_BYTES,
                weight=text_size,
            ):
                loader.load(batch)
                for f in batch:  # the split copies; the source files are never touched
                    if f.path.parent == spool:
                        f.path.unlink(missing_ok=True)
                done += len(batch)
                if progress:
                    progress(done, len(listed))
    log.info("ingest.done", **report.as_dict())
    return report


def _list_new(
    store: Store,
    reader: _Reader,
    source: CloudTrailSource,
    cursor_key: str,
    since: dt.date | None,
    until: dt.date | None,
    today: dt.date,
    report: IngestReport,
) -> Iterator[Listed]:
    lookback = max(1, source.lookback_days)
    if since or until:
        window = Window(since or dt.date(1970, 1, 1), until or today, backfill=True)
    else:
        window = Window(today - dt.timedelta(days=lookback), today, backfill=False)
        if not reader.lists_everything:
            oldest_cursor = store.scalar(
                "SELECT min(value) FROM cursors WHERE source = ?", [cursor_key]
            )
            if oldest_cursor:
                # Resume where the slowest partition left off, minus the lookback for late files.
                start = dt.date.fromisoformat(oldest_cursor) - dt.timedelta(days=lookback)
                window = Window(min(start, window.first), today, backfill=False)
    candidates: list[Listed] = []
    for item in reader.list_files(window, source):
        report.files_listed += 1
        if isinstance(item, str):
            report.ignore(item)
            continue
        if source.accounts and item.key.account not in source.accounts:
            report.ignore("account_filtered")
            continue
        if source.regions and item.key.region not in source.regions:
            report.ignore("region_filtered")
            continue
        if reader.lists_everything and not window.contains(item.key.day) and window.backfill:
            report.ignore("outside_window")
            continue
        candidates.append(item)
    fresh = new_uris(store, [c.uri for c in candidates])
    # Oldest delivery first, so a crash leaves a clean prefix behind and the cursor moves forward.
    yield from sorted((c for c in candidates if c.uri in fresh), key=lambda c: c.uri)


class _Reader:
    lists_everything = False
    downloads = False  # whether fetch_all makes local copies (deleted once split)

    def list_files(self, window: Window, source: CloudTrailSource) -> Iterator[Listed | str]:
        raise NotImplementedError

    def fetch_all(self, listed: list[Listed], spool: Path) -> Generator[InputFile, None, None]:
        raise NotImplementedError


def _input(item: Listed, path: Path) -> InputFile:
    meta = {"account": item.key.account, "region": item.key.region, "day": item.key.day.isoformat()}
    return InputFile(
        uri=item.uri,
        path=path,
        size=path.stat().st_size,
        compression=compression_of(path),
        meta=meta,
    )


class _LocalReader(_Reader):
    """A directory laid out like a CloudTrail bucket; every file is classified by its path."""

    lists_everything = True

    def __init__(self, root: Path) -> None:
        if not root.is_dir():
            raise SourceError(
                f"no such directory: {root}", hint="pass --path DIR (a CloudTrail bucket copy)"
            )
        self.root = root

    def list_files(self, window: Window, source: CloudTrailSource) -> Iterator[Listed | str]:
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames.sort()
            for name in sorted(filenames):
                full = Path(dirpath) / name
                key = full.relative_to(self.root).as_posix()
                kind = classify(key)
                if isinstance(kind, str):
                    yield kind
                elif full.stat().st_size == 0:
                    yield "empty_file"
                else:
                    yield Listed(kind, str(full), full.stat().st_size)

    def fetch_all(self, listed: list[Listed], spool: Path) -> Generator[InputFile, None, None]:
        for item in listed:
            yield _input(item, Path(item.uri))


class _S3Reader(_Reader):
    downloads = True

    def __init__(self, source: CloudTrailSource, client: S3Client) -> None:
        self.source = source
        self.client = client
        self.bucket = source.bucket

    def _pages(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        from botocore.exceptions import BotoCoreError, ClientError

        prefix = kwargs.get("Prefix", "")
        try:
            paginator = self.client.get_paginator("list_objects_v2")
            yield from paginator.paginate(Bucket=self.bucket, **kwargs)  # type: ignore[misc]
        except ClientError as exc:
            raise _client_error(exc, self.bucket, prefix) from exc
        except BotoCoreError as exc:
            raise SourceError(
                f"listing s3://{self.bucket}/{prefix} failed: {exc}", transient=True
            ) from exc

    def _common_prefixes(self, prefix: str) -> list[str]:
        out: list[str] = []
        for page in self._pages(Prefix=prefix, Delimiter="/"):
            out.extend(p["Prefix"] for p in page.get("CommonPrefixes", []))
        return out

    def account_prefixes(self) -> list[str]:
        """``…AWSLogs/<account>/`` (account trails) and ``…AWSLogs/o-…/<account>/`` (org trails)."""
        root = f"{self.source.prefix.rstrip('/') + '/' if self.source.prefix else ''}AWSLogs/"
        found: list[str] = []
        for child in self._common_prefixes(root):
            name = child[len(root) :].rstrip("/")
            if name.startswith("o-"):
                if self.source.org_id and name != self.source.org_id:
                    continue
                found.extend(self._common_prefixes(child))
            elif name.isdigit():
                found.append(child)
        if self.source.accounts:
            found = [p for p in found if p.rstrip("/").rsplit("/", 1)[-1] in self.source.accounts]
        return found

    def list_files(self, window: Window, source: CloudTrailSource) -> Iterator[Listed | str]:
        for account_prefix in self.account_prefixes():
            regions = [
                p.rstrip("/").rsplit("/", 1)[-1]
                for p in self._common_prefixes(f"{account_prefix}CloudTrail/")
            ]
            for region in regions:
                if source.regions and region not in source.regions:
                    continue
                for day in window.days():
                    for page in self._pages(Prefix=day_prefix(account_prefix, region, day)):
                        for obj in page.get("Contents", []):
                            kind = classify(obj["Key"])
                            if isinstance(kind, str):
                                yield kind
                            elif obj.get("Size", 0) == 0:
                                yield "empty_file"
                            else:
                                yield Listed(kind, f"s3://{self.bucket}/{obj['Key']}", obj["Size"])

    def fetch_all(self, listed: list[Listed], spool: Path) -> Generator[InputFile, None, None]:
        # Downloads overlap with loading: the pool fetches ahead while DuckDB parses a batch.
        # Closing the iterator cancels queued downloads and waits for running ones.
        pool = ThreadPoolExecutor(max_workers=_FETCH_THREADS, thread_name_prefix="fetch")
        try:
            window = _FETCH_THREADS * 4
            futures = [pool.submit(self._fetch, item, spool) for item in listed[:window]]
            next_index = len(futures)
            for i in range(len(listed)):
                result = futures[i].result()
                futures[i] = None  # type: ignore[call-overload]
                if next_index < len(listed):
                    futures.append(pool.submit(self._fetch, listed[next_index], spool))
                    next_index += 1
                yield result
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _fetch(self, item: Listed, spool: Path) -> InputFile:
        from botocore.exceptions import BotoCoreError, ClientError

        key = item.key.key
        target = spool / f"{abs(hash(item.uri)):x}-{Path(key).name}"
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
            with target.open("wb") as handle:
                shutil.copyfileobj(body, handle, 1024 * 1024)
        except ClientError as exc:
            raise _client_error(exc, self.bucket, key) from exc
        except BotoCoreError as exc:
            raise SourceError(f"reading {item.uri} failed: {exc}", transient=True) from exc
        return _input(item, target)


def _client_error(exc: Any, bucket: str, prefix: str) -> SourceError:
    code = exc.response.get("Error", {}).get("Code", "")
    where = f"s3://{bucket}/{prefix}"
    if code in (
        "AccessDenied",
        "403",
        "AllAccessDisabled",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
    ):
        return AccessDeniedError(
            f"access denied on {where} ({code})",
            hint=f"grant s3:ListBucket on arn:aws:s3:::{bucket} and s3:GetObject on "
            f"arn:aws:s3:::{bucket}/{prefix}* to the role Sentinel runs as",
        )
    if code == "NoSuchBucket":
        return SourceError(
            f"bucket {bucket} does not exist", hint="check sources.cloudtrail.bucket"
        )
    transient = code in (
        "SlowDown",
        "Throttling",
        "RequestTimeout",
        "InternalError",
        "ServiceUnavailable",
        "503",
        "500",
    )
    return SourceError(f"S3 error on {where}: {code}: {exc}", transient=transient)


def make_s3_client(source: CloudTrailSource) -> S3Client:
    """boto3 S3 client; standard retry mode backs off on throttling (SlowDown) and 5xx."""
    import boto3
    from botocore.config import Config as BotoConfig

    kwargs: dict[str, Any] = {
        "config": BotoConfig(
            retries={"max_attempts": 10, "mode": "standard"},
            max_pool_connections=_FETCH_THREADS * 2,
        ),
    }
    if source.endpoint_url:
        kwargs["endpoint_url"] = source.endpoint_url
    return boto3.client("s3", **kwargs)


def gunzip_bytes(data: bytes) -> bytes:
    """Decompress if the bytes start with the gzip magic (used by `event show`)."""
    return gzip.decompress(data) if data[:2] == GZIP_MAGIC else data
