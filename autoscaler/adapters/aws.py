"""The one way this project makes a boto3 client: botocore's standard retries, and every failed
attempt logged.

Standard retry mode retries throttling, 5xx and connection errors with exponential backoff and full
jitter, within a retry quota (botocore's; no loop of ours). Each failed attempt is logged as
``aws_call_failed`` with the operation, the attempt number and the error code, so throttling shows in
the daemon's log even when a retry then succeeds.

At start-up a call that still fails with such an error after botocore's attempts is tried again
(``retry_at_startup``, tenacity) until a start-up wait runs out: a daemon that starts into a passing
throttle or outage waits it out rather than exit. ``is_transient`` is the test, botocore's own.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable
from typing import TypeVar

import boto3
import botocore
import structlog
import tenacity
from botocore.client import BaseClient
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoRegionError
from botocore.retries.standard import (
    ModeledRetryableChecker,
    OrRetryChecker,
    RetryContext,
    ThrottledRetryableChecker,
    ThrottlingStatusCodeChecker,
    TransientRetryableChecker,
)

from autoscaler.core.errors import ConfigError, OutageError

T = TypeVar("T")

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


def known_regions(service: str, session: boto3.Session | None = None) -> list[str]:
    """Every region botocore's bundled endpoint data lists for ``service``, in all partitions (aws,
    aws-cn, aws-us-gov, ...). Offline: reads the data installed with botocore."""
    session = session or boto3.Session()
    return [region for partition in session.get_available_partitions() for region in session.get_available_regions(service, partition_name=partition)]


def check_region(service: str, region: str, setting: str, session: boto3.Session | None = None) -> None:
    """ConfigError unless ``region`` is one botocore knows for ``service``; the message names
    ``setting`` (e.g. "cluster.region") and suggests the closest known names. Calls nothing."""
    known = known_regions(service, session)
    if region in known:
        return
    close = difflib.get_close_matches(region, known, n=3, cutoff=0.6)
    # A transposed pair of letters ("us-esat-1") keeps every character: rank those first.
    close.sort(key=lambda name: sorted(name) != sorted(region))
    if close:
        others = f" (or {', '.join(repr(name) for name in close[1:])})" if close[1:] else ""
        expected = f"did you mean {close[0]!r}{others}?"
    else:
        expected = f"expected one of {', '.join(known)}"
    raise ConfigError(
        f"{setting} = {region!r}: not a region botocore {botocore.__version__} knows for {service}; {expected} "
        "(a region newer than this botocore needs a newer botocore)"
    )


_STANDARD_RETRY = OrRetryChecker(
    [TransientRetryableChecker(), ThrottledRetryableChecker(), ThrottlingStatusCodeChecker(), ModeledRetryableChecker()]
)
"""botocore's standard retry conditions (``StandardRetryConditions``) less the attempt count and its
two service-specific checks (STS's IDPCommunicationError, DynamoDB's CRC32), which need an operation
model; EMR, CloudWatch and SES model no retryable errors of their own."""


class _Status:
    """The HTTP status of an answer, as botocore's retry checkers read it (``status_code``)."""

    def __init__(self, status_code: int | None) -> None:
        self.status_code = status_code


def is_transient(error: BaseException) -> bool:
    """Whether botocore's standard retry mode retries the AWS error behind ``error`` (it or one of
    its causes): throttling codes, HTTP 500/502/503/504 and 429, request timeouts, connection and
    HTTP client errors. Errors not from botocore, and AWS refusing the request (a validation error,
    a missing cluster, access denied, no credentials), are not transient."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, ClientError):
            status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            context = RetryContext(attempt_number=1, parsed_response=error.response, http_response=_Status(status))
            return _STANDARD_RETRY.is_retryable(context)
        if isinstance(error, BotoCoreError):
            return _STANDARD_RETRY.is_retryable(RetryContext(attempt_number=1, caught_exception=error))
        error = error.__cause__
    return False


def retry_at_startup(
    call: Callable[[], T],
    what: str,
    wait_s: float,
    first_backoff_s: float,
    max_backoff_s: float,
    before_retry: Callable[[], None] | None = None,
) -> T:
    """``call()``, tried again while it raises an error that ``is_transient`` passes, until the next
    try would start more than ``wait_s`` seconds after the first one; returns what it returns.

    Between tries: tenacity's full-jitter exponential backoff, a random wait up to ``first_backoff_s``
    doubling each try, at most ``max_backoff_s``; each wait is logged as ``startup_retry`` (attempt,
    wait_s, error). ``before_retry`` runs before each new try (e.g. a fresh client, whose botocore
    retry quota is full again). Any other error is raised as it is, at once. Raises OutageError,
    naming ``what``, the last error, the tries and the seconds waited, when the wait runs out; a try
    begun before then runs its course (botocore's own attempts included).
    """
    started = time.monotonic()

    def log_retry(state: tenacity.RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning("startup_retry", what=what, attempt=state.attempt_number, wait_s=round(wait, 3), error=str(error))
        if before_retry is not None:
            before_retry()

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(is_transient),
        stop=tenacity.stop_before_delay(wait_s),
        wait=tenacity.wait_random_exponential(multiplier=first_backoff_s, max=max_backoff_s),
        before_sleep=log_retry,
        reraise=False,
    )
    try:
        return retrying(call)
    except tenacity.RetryError as gave_up:
        last = gave_up.last_attempt
        waited_s = time.monotonic() - started
        raise OutageError(
            f"{what}: still failing after {waited_s:.1f} s of start-up tries ({last.attempt_number} tries, "
            f"the start-up wait is {wait_s:g} s), last with: {last.exception()}. These errors pass "
            "(throttling, 5xx, no connection): exit status 75 asks the service manager to start again later",
            waited_s=waited_s,
            tries=last.attempt_number,
        ) from last.exception()
