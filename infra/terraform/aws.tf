# AWS: a trail that records object-level events on the weight buckets plus management events,
# the bucket it writes to, an object-locked archive for findings, and a role for Sentinel that
# reads the trail's files and nothing else (explicitly nothing on the weight buckets).

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}

locals {
  weight_bucket_arns  = [for b in var.aws_weight_buckets : "arn:${data.aws_partition.current.partition}:s3:::${b}"]
  weight_object_arns  = [for b in var.aws_weight_buckets : "arn:${data.aws_partition.current.partition}:s3:::${b}/"]
  weight_object_globs = [for b in var.aws_weight_buckets : "arn:${data.aws_partition.current.partition}:s3:::${b}/*"]
  trail_bucket_arn    = "arn:${data.aws_partition.current.partition}:s3:::${var.trail_bucket}"
  archive_bucket_arn  = "arn:${data.aws_partition.current.partition}:s3:::${var.archive_bucket}"
}

# -- the trail ------------------------------------------------------------------------------------
resource "aws_s3_bucket" "trail" {
  bucket = var.trail_bucket
}

resource "aws_s3_bucket_public_access_block" "trail" {
  bucket                  = aws_s3_bucket.trail.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_versioning" "trail" {
  bucket = aws_s3_bucket.trail.id
  versioning_configuration {
    status = "Enabled"
  }
}

data "aws_iam_policy_document" "trail_bucket" {
  statement {
    sid       = "CloudTrailAclCheck"
    actions   = ["s3:GetBucketAcl"]
    resources = [local.trail_bucket_arn]
    principals {
      type        = "Service"
      identifiers = ["cloudtrail.amazonaws.com"]
    }
  }
  statement {
    sid       = "CloudTrailWrite"
    actions   = ["s3:PutObject"]
    resources = ["${local.trail_bucket_arn}/AWSLogs/${data.aws_caller_identity.current.account_id}/*"]
    principals {
      type        = "Service"
      identifiers = ["cloudtrail.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "s3:x-amz-acl"
      values   = ["bucket-owner-full-control"]
    }
  }
}

resource "aws_s3_bucket_policy" "trail" {
  bucket = aws_s3_bucket.trail.id
  policy = data.aws_iam_policy_document.trail_bucket.json
}

resource "aws_cloudtrail" "weights" {
  name                          = "${var.name}-weights"
  s3_bucket_name                = aws_s3_bucket.trail.id
  is_multi_region_trail         = true
  include_global_service_events = true
  enable_log_file_validation    = true

  advanced_event_selector {
    name = "Management events (bucket policy, versioning, lifecycle, IAM changes)"
    field_selector {
      field  = "eventCategory"
      equals = ["Management"]
    }
  }

  advanced_event_selector {
    name = "Object events on the weight buckets only"
    field_selector {
      field  = "eventCategory"
      equals = ["Data"]
    }
    field_selector {
      field  = "resources.type"
      equals = ["AWS::S3::Object"]
    }
    field_selector {
      field       = "resources.ARN"
      starts_with = local.weight_object_arns
    }
  }

  depends_on = [aws_s3_bucket_policy.trail]
}

# -- the archive for findings ---------------------------------------------------------------------
resource "aws_s3_bucket" "archive" {
  bucket              = var.archive_bucket
  object_lock_enabled = true
}

resource "aws_s3_bucket_versioning" "archive" {
  bucket = aws_s3_bucket.archive.id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_object_lock_configuration" "archive" {
  bucket = aws_s3_bucket.archive.id
  rule {
    default_retention {
      mode = "COMPLIANCE"
      days = var.archive_retention_days
    }
  }
}

resource "aws_s3_bucket_public_access_block" "archive" {
  bucket                  = aws_s3_bucket.archive.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

# -- Sentinel's identity (IRSA) -------------------------------------------------------------------
data "aws_iam_policy_document" "sentinel_trust" {
  statement {
    actions = ["sts:AssumeRoleWithWebIdentity"]
    principals {
      type        = "Federated"
      identifiers = [var.eks_oidc_provider_arn]
    }
    condition {
      test     = "StringEquals"
      variable = "${var.eks_oidc_provider_url}:sub"
      values   = ["system:serviceaccount:${var.k8s_namespace}:sentinel"]
    }
    condition {
      test     = "StringEquals"
      variable = "${var.eks_oidc_provider_url}:aud"
      values   = ["sts.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "sentinel" {
  name               = "${var.name}-reader"
  assume_role_policy = data.aws_iam_policy_document.sentinel_trust.json
}

data "aws_iam_policy_document" "sentinel" {
  statement {
    sid       = "ListTrailFiles"
    actions   = ["s3:ListBucket"]
    resources = [local.trail_bucket_arn]
    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = ["AWSLogs/*"]
    }
  }
  statement {
    sid       = "ReadTrailFiles"
    actions   = ["s3:GetObject"]
    resources = ["${local.trail_bucket_arn}/AWSLogs/*"]
  }
  statement {
    sid       = "WriteFindingsArchive"
    actions   = ["s3:PutObject"]
    resources = ["${local.archive_bucket_arn}/findings/*"]
  }
  statement {
    sid       = "NeverTheWeights"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = concat(local.weight_bucket_arns, local.weight_object_globs)
  }
}

resource "aws_iam_role_policy" "sentinel" {
  name   = "${var.name}-read-trail"
  role   = aws_iam_role.sentinel.id
  policy = data.aws_iam_policy_document.sentinel.json
}

output "sentinel_role_arn" {
  description = "Annotate the sentinel ServiceAccount with this (eks.amazonaws.com/role-arn)."
  value       = aws_iam_role.sentinel.arn
}
