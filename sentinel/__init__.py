"""Sentinel: security analytics for model-weight buckets and inference logs."""

__version__ = "0.1.0"
