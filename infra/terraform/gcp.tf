# GCP: switch on GCS Data Access audit logs in the weight projects, export them with a log sink
# to a bucket, and give Sentinel's service account read access to those logs only: no storage
# role in the weight projects, so it can never read the weights themselves.

resource "google_project_iam_audit_config" "gcs_data_access" {
  for_each = toset(var.gcp_weight_projects)
  project  = each.value
  service  = "storage.googleapis.com"
  audit_log_config {
    log_type = "DATA_READ"
  }
  audit_log_config {
    log_type = "DATA_WRITE"
  }
  audit_log_config {
    log_type = "ADMIN_READ"
  }
}

resource "google_storage_bucket" "sink" {
  project                     = var.gcp_log_project
  name                        = var.gcp_sink_bucket
  location                    = var.gcp_location
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  versioning {
    enabled = true
  }
}

resource "google_logging_project_sink" "gcs_audit" {
  for_each               = toset(var.gcp_weight_projects)
  project                = each.value
  name                   = "${var.name}-gcs-audit"
  destination            = "storage.googleapis.com/${google_storage_bucket.sink.name}"
  unique_writer_identity = true
  filter                 = "protoPayload.serviceName=\"storage.googleapis.com\" AND logName:\"cloudaudit.googleapis.com\""
}

resource "google_storage_bucket_iam_member" "sink_writer" {
  for_each = google_logging_project_sink.gcs_audit
  bucket   = google_storage_bucket.sink.name
  role     = "roles/storage.objectCreator"
  member   = each.value.writer_identity
}

resource "google_service_account" "sentinel" {
  project      = var.gcp_log_project
  account_id   = "${var.name}-reader"
  display_name = "Sentinel: reads GCS audit logs, never the weights"
}

resource "google_storage_bucket_iam_member" "sentinel_reads_sink" {
  bucket = google_storage_bucket.sink.name
  role   = "roles/storage.objectViewer"
  member = "serviceAccount:${google_service_account.sentinel.email}"
}

# Reading Data Access audit logs through the Cloud Logging API needs privateLogViewer; it grants
# log entries only, no access to bucket contents.
resource "google_project_iam_member" "sentinel_reads_audit_logs" {
  for_each = toset(var.gcp_weight_projects)
  project  = each.value
  role     = "roles/logging.privateLogViewer"
  member   = "serviceAccount:${google_service_account.sentinel.email}"
}

resource "google_service_account_iam_member" "workload_identity" {
  service_account_id = google_service_account.sentinel.name
  role               = "roles/iam.workloadIdentityUser"
  member             = "serviceAccount:${var.gcp_log_project}.svc.id.goog[${var.k8s_namespace}/sentinel]"
}

output "sentinel_gcp_service_account" {
  description = "Annotate the sentinel ServiceAccount with this (iam.gke.io/gcp-service-account)."
  value       = google_service_account.sentinel.email
}
