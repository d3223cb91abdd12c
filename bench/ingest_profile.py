"""Where CloudTrail ingest time goes: each step of the loader's SQL timed on its own, on the same
generated files, as cumulative wall seconds per million events (best of three).

    python bench/ingest_profile.py            # 200k events
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import polars as pl  # noqa: E402
from cloudtrail_corpus import build, files_of  # noqa: E402

from sentinel.ingest import EVENT_COLUMNS, InputFile  # noqa: E402
from sentinel.sources.cloudtrail_sql import _PATHS, CloudTrailFormat  # noqa: E402
from sentinel.store import Store  # noqa: E402

EVENTS = 200_000


def best(store: Store, sql: str, reset: str | None = None) -> float:
    times = []
    for _ in range(3):
        if reset:
            store.execute(reset)
        started = time.perf_counter()
        store.execute(sql)
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    corpus = build(HERE / "out" / f"cloudtrail-{EVENTS}", EVENTS)
    files = [InputFile(str(p), p, p.stat().st_size, "gzip") for p in files_of(corpus)]
    listed = ", ".join(f"'{f.path}'" for f in files)
    read = (
        f"read_json([{listed}], format='unstructured', records=true,"
        " columns={'Records': 'JSON[]'}, compression='gzip', maximum_object_size=67108864)"
    )
    paths = ", ".join("'" + p.replace("'", "''") + "'" for _, p in _PATHS)
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "p.duckdb") as store:
        store.register(
            "_batch_files",
            pl.DataFrame(
                {
                    "path": [str(f.path) for f in files],
                    "uri": [f.uri for f in files],
                    "account": ["111122223333"] * len(files),
                    "region": ["us-east-1"] * len(files),
                }
            ),
        )
        stage = CloudTrailFormat().stage_query("_batch_files", files)
        keep = "NOT (action IN ('read', 'metadata', 'list') AND error_code IS NULL)"
        ctas = (
            "CREATE OR REPLACE TEMP TABLE _stage AS SELECT * REPLACE (CASE WHEN bad_reason"
            f" IS NOT NULL OR {keep} THEN record END AS record) FROM ({stage})"
        )
        columns = ", ".join(c for c in EVENT_COLUMNS if c not in ("load_id", "raw"))
        steps = [
            (
                "decompress, parse, split Records",
                f"CREATE OR REPLACE TEMP TABLE t AS SELECT count(r) FROM (SELECT unnest(Records) r FROM {read})",
                None,
            ),
            (
                "+ extract the 25 fields",
                f"CREATE OR REPLACE TEMP TABLE t AS SELECT count(json_extract_string(r, [{paths}])) FROM (SELECT unnest(Records) r FROM {read})",
                None,
            ),
            (
                "+ normalize (the whole stage query)",
                f"CREATE OR REPLACE TEMP TABLE t AS SELECT count(*), count(record), count(actor), count(action) FROM ({stage})",
                None,
            ),
            ("+ materialize the staging table", ctas, None),
        ]
        print(f"{EVENTS:,} events in {len(files)} files; wall seconds per million events")
        for name, sql, reset in steps:
            print(f"  {name:40} {best(store, sql, reset) * 1e6 / EVENTS:6.2f}")
        store.execute(ctas)
        insert = (
            f"INSERT INTO access_events ({columns}, load_id, raw) SELECT {columns}, 1, record"
            " FROM _stage WHERE envelope_ok AND bad_reason IS NULL AND NOT skip"
        )
        seconds = best(store, insert, reset="DELETE FROM access_events")
        print(f"  {'insert into access_events (alone)':40} {seconds * 1e6 / EVENTS:6.2f}")


if __name__ == "__main__":
    main()
