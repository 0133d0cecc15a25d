"""The one way this project makes a boto3 client: botocore's standard retries, and every failed
attempt logged.

Standard retry mode retries throttling, 5xx and connection errors with exponential backoff and full
jitter, within a retry quota (botocore's; no loop of ours). Each failed attempt is logged as
``aws_call_failed`` with the operation, the attempt number and the error code, so throttling shows in
the daemon's log even when a retry then succeeds.
"""

from __future__ import annotations

import boto3
import structlog
from botocore.client import BaseClient
from botocore.config import Config
from botocore.exceptions import NoRegionError

from autoscaler.errors import ConfigError

RETRIES = {"mode": "standard", "max_attempts": 5}
"""botocore's retry settings. In a ``Config``, ``max_attempts`` counts retries after the first
call, so a failing call is sent at most 6 times (``client.meta.config.retries`` shows
``total_max_attempts: 6``)."""

log = structlog.get_logger("autoscaler")


def aws_client(
    service: str,
    label: str,
    region: str | None = None,
    endpoint_url: str | None = None,
    session: boto3.Session | None = None,
) -> BaseClient:
    """A boto3 client for ``service`` ("emr", "cloudwatch", "ses"); ``label`` names it in errors.

    ``region`` and ``endpoint_url`` default to the session's configuration (AWS_DEFAULT_REGION /
    AWS_REGION / profile; AWS_ENDPOINT_URL_<SERVICE> or AWS_ENDPOINT_URL, which boto3 reads itself).
    ``session`` defaults to a new ``boto3.Session()``. Does not call AWS. Raises ConfigError when no
    region is given or configured.
    """
    session = session or boto3.Session()
    try:
        client = session.client(service, region_name=region, endpoint_url=endpoint_url, config=Config(retries=dict(RETRIES)))
    except NoRegionError as error:
        raise ConfigError(f"{label} client: no AWS region; pass region or set AWS_DEFAULT_REGION (or a profile region)") from error
    client.meta.events.register("needs-retry", _log_failed_attempt)
    return client


def _log_failed_attempt(response=None, operation=None, attempts=None, caught_exception=None, **_) -> None:
    """botocore ``needs-retry`` hook: log a failed attempt; returns None, leaving the decision to retry to botocore."""
    if caught_exception is not None:
        error = type(caught_exception).__name__
    elif response is not None and response[0].status_code >= 300:
        error = response[1].get("Error", {}).get("Code") or f"HTTP {response[0].status_code}"
    else:
        return None
    log.warning("aws_call_failed", operation=getattr(operation, "name", operation), attempt=attempts, error=error)
    return None
