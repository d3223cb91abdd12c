"""Which keys in a CloudTrail bucket are event files, and what their names say.

CloudTrail shares its bucket layout with digests, Insights, network-activity and aggregated
files, folder placeholders and other services' objects. Only keys matching the documented event
file name are loaded; everything else is counted under a reason and never parsed.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

_EVENT_KEY = re.compile(
    r"^(?P<prefix>(?:.*/)?)AWSLogs/(?:(?P<org>o-[a-z0-9]{10,32})/)?(?P<account>\d{12})/CloudTrail/"
    r"(?P<region>[a-z0-9-]+)/(?P<y>\d{4})/(?P<m>\d{2})/(?P<d>\d{2})/"
    r"(?P=account)_CloudTrail_(?P=region)_(?P<stamp>\d{8}T\d{4}Z)_[A-Za-z0-9]{16}"
    r"\.json(?:\.gz)?$"
)
_SIBLINGS = {
    "CloudTrail-Digest": "digest",
    "CloudTrail-Insight": "insight",
    "CloudTrail-NetworkActivity": "network_activity",
    "CloudTrail-Aggregated": "aggregated",
    "CloudTrail-Lake": "lake_query_result",
}


@dataclass(frozen=True)
class EventKey:
    key: str
    account: str
    region: str
    day: dt.date
    org_id: str | None


def classify(key: str) -> EventKey | str:
    """An ``EventKey`` for a CloudTrail event file, else the reason it is not one."""
    if key.endswith("/"):
        return "folder_placeholder"
    match = _EVENT_KEY.match(key)
    if match:
        try:
            day = dt.date(int(match["y"]), int(match["m"]), int(match["d"]))
        except ValueError:
            return "not_cloudtrail"
        return EventKey(key, match["account"], match["region"], day, match["org"])
    parts = key.split("/")
    for part in parts:
        if part in _SIBLINGS:
            return _SIBLINGS[part]
    if "CloudTrail-Digest" in key or key.endswith("_backfill.json.gz"):
        return "digest"
    return "not_cloudtrail"


def day_prefix(account_prefix: str, region: str, day: dt.date) -> str:
    """``<…>/AWSLogs/[o-id/]<account>/`` + ``CloudTrail/<region>/YYYY/MM/DD/``."""
    return f"{account_prefix}CloudTrail/{region}/{day:%Y/%m/%d}/"
