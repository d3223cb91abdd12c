# Inputs. The weight buckets are the things Sentinel watches and must never be able to read.

variable "name" {
  description = "Prefix for every resource this module creates."
  type        = string
  default     = "sentinel"
}

variable "aws_weight_buckets" {
  description = "S3 buckets holding model weights and checkpoints (object events are logged)."
  type        = list(string)
}

variable "trail_bucket" {
  description = "S3 bucket that receives the CloudTrail log files Sentinel reads."
  type        = string
}

variable "archive_bucket" {
  description = "S3 bucket for exported findings, under object lock."
  type        = string
}

variable "archive_retention_days" {
  description = "Object-lock retention of archived findings (COMPLIANCE mode)."
  type        = number
  default     = 365
}

variable "eks_oidc_provider_arn" {
  description = "IAM OIDC provider of the EKS cluster running Sentinel (IRSA)."
  type        = string
}

variable "eks_oidc_provider_url" {
  description = "Issuer URL of that provider without https:// (e.g. oidc.eks.eu-west-1.amazonaws.com/id/ABC)."
  type        = string
}

variable "k8s_namespace" {
  description = "Namespace of the sentinel ServiceAccount."
  type        = string
  default     = "sentinel"
}

variable "gcp_log_project" {
  description = "GCP project that hosts the log sink bucket and Sentinel's service account."
  type        = string
}

variable "gcp_weight_projects" {
  description = "GCP projects whose GCS Data Access audit logs are switched on and exported."
  type        = list(string)
}

variable "gcp_sink_bucket" {
  description = "GCS bucket receiving the exported audit log entries (JSONL) Sentinel reads."
  type        = string
}

variable "gcp_location" {
  description = "Location of the sink bucket."
  type        = string
  default     = "EU"
}
