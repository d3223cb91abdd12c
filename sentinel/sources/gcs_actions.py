"""What each GCS audit-log ``methodName`` does to an object, as ``access_events.action``.

The same vocabulary as ``sentinel.actions`` for AWS, so every rule reads both clouds alike.
Two methods depend on their request, not only on their name, and are decided in SQL
(``gcs_sql``): ``storage.buckets.update`` is 'tamper' when it touches a protection (lifecycle,
retention, versioning, soft delete, object lock), else 'write'; ``storage.objects.update`` /
``.patch`` are 'tamper' when they change an object's retention, else 'write'.
"""

from __future__ import annotations

_GCP: dict[str, tuple[str, ...]] = {
    # Audit logs cannot tell a media GET from a metadata GET (both are storage.objects.get under
    # DATA_READ), so every successful get counts as a read.
    "read": ("storage.objects.get",),
    "metadata": (
        "storage.buckets.get",
        "storage.buckets.getIamPolicy",
        "storage.getIamPermissions",
        "storage.objects.getIamPolicy",
        "storage.managedFolders.get",
        "storage.managedFolders.getIamPolicy",
        "storage.buckets.getStorageLayout",
    ),
    "list": (
        "storage.objects.list",
        "storage.buckets.list",
        "storage.managedFolders.list",
        "storage.multipartUploads.list",
        "storage.multipartUploads.listParts",
    ),
    "write": (
        "storage.objects.create",
        "storage.objects.compose",
        "storage.objects.rewrite",
        "storage.objects.copy",
        "storage.objects.restore",
        "storage.objects.move",
        "storage.objects.update",
        "storage.objects.patch",
        "storage.buckets.create",
        "storage.buckets.update",
        "storage.buckets.patch",
        "storage.managedFolders.create",
        "storage.multipartUploads.create",
        "storage.multipartUploads.abort",
    ),
    "delete": ("storage.objects.delete",),
    # IAM and ACL changes on buckets, objects and managed folders, and the bucket itself.
    "tamper": (
        "storage.setIamPermissions",
        "storage.buckets.setIamPolicy",
        "storage.objects.setIamPolicy",
        "storage.managedFolders.setIamPolicy",
        "storage.buckets.delete",
        "storage.buckets.lockRetentionPolicy",
        "storage.managedFolders.delete",
    ),
}

GCP_ACTIONS: dict[str, str] = {op: action for action, ops in _GCP.items() for op in ops}

# Fields of a bucket resource whose change weakens what protects stored weights. Their presence
# in ``request.metadata`` (even as null, which removes them) makes a bucket update 'tamper'.
BUCKET_PROTECTION_FIELDS = (
    "lifecycle",
    "retentionPolicy",
    "versioning",
    "softDeletePolicy",
    "objectRetention",
    "iamConfiguration",
    "acl",
    "defaultObjectAcl",
)
# Object fields whose change is a retention change (set or override of an object's retention).
OBJECT_RETENTION_FIELDS = ("retention", "temporaryHold", "eventBasedHold")


def gcp_action(method: str) -> str:
    return GCP_ACTIONS.get(method, "other")
