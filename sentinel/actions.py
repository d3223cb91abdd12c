"""What each storage API call does to an object, as the ``action`` column of ``access_events``.

One table per provider so the same rules work on both clouds. Unlisted operations are 'other'.
"""

from __future__ import annotations

ACTIONS = ("read", "metadata", "list", "write", "delete", "tamper", "other")

_AWS: dict[str, tuple[str, ...]] = {
    "read": ("GetObject", "GetObjectTorrent", "SelectObjectContent"),
    "metadata": (
        "HeadObject",
        "GetObjectAttributes",
        "GetObjectAcl",
        "GetObjectTagging",
        "GetObjectRetention",
        "GetObjectLegalHold",
        "HeadBucket",
        "GetBucketLocation",
        "GetBucketPolicy",
        "GetBucketAcl",
        "GetBucketVersioning",
        "GetBucketLifecycle",
        "GetBucketLifecycleConfiguration",
        "GetBucketReplication",
        "GetBucketEncryption",
        "GetBucketObjectLockConfiguration",
        "GetObjectLockConfiguration",
        "GetBucketPublicAccessBlock",
        "GetBucketOwnershipControls",
        "GetBucketTagging",
    ),
    "list": (
        "ListObjects",
        "ListObjectsV2",
        "ListObjectVersions",
        "ListParts",
        "ListMultipartUploads",
        "ListBuckets",
    ),
    "write": (
        "PutObject",
        "CreateMultipartUpload",
        "UploadPart",
        "CompleteMultipartUpload",
        "AbortMultipartUpload",
        "PutObjectAcl",
        "PutObjectTagging",
        "DeleteObjectTagging",
        "UpdateObjectEncryption",
        "CopyObject",
        "UploadPartCopy",
        "RestoreObject",
        "CreateBucket",
        "PutBucketTagging",
    ),
    "delete": ("DeleteObject", "DeleteObjects"),
    # Anything that weakens protection of what is stored: retention, versioning, policies,
    # replication, encryption, public access, and the bucket itself.
    "tamper": (
        "PutBucketVersioning",
        "PutBucketLifecycle",
        "PutBucketLifecycleConfiguration",
        "DeleteBucketLifecycle",
        "PutBucketPolicy",
        "DeleteBucketPolicy",
        "PutBucketReplication",
        "DeleteBucketReplication",
        "PutBucketObjectLockConfiguration",
        "PutObjectLockConfiguration",
        "PutObjectRetention",
        "PutObjectLegalHold",
        "PutBucketAcl",
        "PutBucketPublicAccessBlock",
        "DeleteBucketPublicAccessBlock",
        "PutAccountPublicAccessBlock",
        "DeleteAccountPublicAccessBlock",
        "PutBucketOwnershipControls",
        "DeleteBucketOwnershipControls",
        "PutBucketEncryption",
        "DeleteBucketEncryption",
        "DeleteBucket",
    ),
}

AWS_ACTIONS: dict[str, str] = {op: action for action, ops in _AWS.items() for op in ops}


def aws_action(operation: str) -> str:
    return AWS_ACTIONS.get(operation, "other")


def sql_case(column: str, mapping: dict[str, str], default: str = "other") -> str:
    """A SQL CASE expression mapping ``column`` through ``mapping`` (names are ours, not input)."""
    by_action: dict[str, list[str]] = {}
    for op, action in mapping.items():
        by_action.setdefault(action, []).append(op)
    arms = " ".join(
        f"WHEN {column} IN ({', '.join(_quote(o) for o in ops)}) THEN {_quote(action)}"
        for action, ops in by_action.items()
    )
    return f"CASE {arms} ELSE {_quote(default)} END"


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
