"""Where CloudTrail ingest time goes, over one loader batch of generated files (1 GiB of JSON,
~0.5M events), as wall seconds per million events (best of three): the split (two Python
threads), the statements of the staged path (cumulative; batches holding a record to quarantine
take it), and the one-pass load every clean batch takes. In a real run the split of the next
batch overlaps the load of this one.

    python bench/ingest_profile.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import polars as pl  # noqa: E402
from cloudtrail_corpus import build, files_of  # noqa: E402

from sentinel.ingest import EVENT_COLUMNS, IngestReport, InputFile, Loader  # noqa: E402
from sentinel.sources.cloudtrail import _BATCH_TEXT_BYTES  # noqa: E402
from sentinel.sources.cloudtrail_records import (  # noqa: E402
    keep_large_buffers,
    split,
    spool_root,
    text_size,
)
from sentinel.sources.cloudtrail_sql import _PATHS, CloudTrailFormat, _read  # noqa: E402
from sentinel.store import Store  # noqa: E402

CORPUS_EVENTS = 1_000_000


def best(run: object, reset: object = None) -> float:
    times = []
    for _ in range(3):
        if callable(reset):
            reset()
        started = time.perf_counter()
        run()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    keep_large_buffers()
    corpus = build(HERE / "out" / f"cloudtrail-{CORPUS_EVENTS}", CORPUS_EVENTS)
    files: list[InputFile] = []
    for path in files_of(corpus):
        candidate = InputFile(str(path), path, path.stat().st_size, "gzip")
        if sum(text_size(f) for f in files) + text_size(candidate) > _BATCH_TEXT_BYTES:
            break
        files.append(candidate)
    with tempfile.TemporaryDirectory(dir=spool_root()) as spool_dir:
        events = sum(int(split(f, Path(spool_dir) / "x").meta["records"]) for f in files)
    per_million = 1e6 / events
    print(f"{events:,} events in {len(files)} files; wall seconds per million events")
    with tempfile.TemporaryDirectory(dir=spool_root()) as spool_dir:
        spool = Path(spool_dir)
        targets = [spool / f"{i}.txt" for i in range(len(files))]
        with ThreadPoolExecutor(2) as pool:
            seconds = best(lambda: list(pool.map(split, files, targets)))
        print(f"  {'split: gunzip, walk envelope, write lines':44} {seconds * per_million:6.2f}")
        split_files = [split(f, t) for f, t in zip(files, targets, strict=True)]
        _load_steps(split_files, per_million)
        print(
            f"  {'load the batch as ingest does (one pass)':44} {_one_pass(split_files) * per_million:6.2f}"
        )


def _one_pass(split_files: list[InputFile]) -> float:
    """``Loader.load`` on a fresh database: read, extract, normalize, insert, bookkeeping."""
    times = []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "l.duckdb") as store:
            loader = Loader(store, CloudTrailFormat(), source="bench", keep_raw="non_read",
                            report=IngestReport("bench"))  # fmt: skip
            started = time.perf_counter()
            loader.load(split_files)
            times.append(time.perf_counter() - started)
    return min(times)


def _load_steps(split_files: list[InputFile], per_million: float) -> None:
    """The staged path's statements (taken by batches that hold a record to quarantine)."""
    paths = ", ".join("'" + p.replace("'", "''") + "'" for _, p in _PATHS)
    read = _read(split_files)
    keep = "NOT (action IN ('read', 'metadata', 'list') AND error_code IS NULL)"
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "p.duckdb") as store:
        store.register(
            "_batch_files",
            pl.DataFrame(
                {
                    "path": [str(f.path) for f in split_files],
                    "uri": [f.uri for f in split_files],
                    "account": ["111122223333"] * len(split_files),
                    "region": ["us-east-1"] * len(split_files),
                }
            ),
        )
        stage = CloudTrailFormat().stage_query("_batch_files", split_files)
        ctas = (
            "CREATE OR REPLACE TEMP TABLE _stage AS SELECT * REPLACE (CASE WHEN bad_reason"
            f" IS NOT NULL OR {keep} THEN record END AS record) FROM ({stage})"
        )
        columns = ", ".join(c for c in EVENT_COLUMNS if c not in ("load_id", "raw"))
        steps = [
            ("staged path: read the lines", f"SELECT count(record) FROM {read}"),
            (
                "+ extract the 25 fields",
                f"SELECT count(json_extract_string(record, [{paths}])) FROM {read}",
            ),
            (
                "+ normalize (the whole stage query)",
                f"SELECT count(*), count(bad_reason), count(actor), count(record) FROM ({stage})",
            ),
            ("+ materialize the staging table", ctas),
        ]
        for name, sql in steps:
            print(f"  {name:44} {best(lambda sql=sql: store.execute(sql)) * per_million:6.2f}")
        store.execute(ctas)
        insert = (
            f"INSERT INTO access_events ({columns}, load_id, raw) SELECT {columns}, 1, record"
            " FROM _stage WHERE envelope_ok AND bad_reason IS NULL AND NOT skip"
        )
        seconds = best(
            lambda: store.execute(insert), reset=lambda: store.execute("DELETE FROM access_events")
        )
        print(f"  {'insert into access_events (alone)':44} {seconds * per_million:6.2f}")


if __name__ == "__main__":
    main()
