"""Child process of the ingest benchmark: one measured ingest, figures as JSON on stdout."""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sentinel.config import CloudTrailSource
from sentinel.sources import cloudtrail
from sentinel.store import Store


def main() -> None:
    db, corpus, keep_raw = sys.argv[1], sys.argv[2], sys.argv[3]
    started = time.perf_counter()
    with Store.open(db) as store:
        report = cloudtrail.run(store, CloudTrailSource(path=corpus), keep_raw=keep_raw)  # type: ignore[arg-type]
        events = store.scalar("SELECT count(*) FROM access_events")
    seconds = time.perf_counter() - started
    print(
        json.dumps(
            {
                "events": events,
                "seconds": seconds,
                "events_per_s": events / seconds,
                "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "db_mib": Path(db).stat().st_size / 2**20,
                "quarantined": report.files_quarantined + report.records_quarantined,
            }
        )
    )


if __name__ == "__main__":
    main()
