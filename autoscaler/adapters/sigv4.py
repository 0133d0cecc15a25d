"""Who sent a request: AWS Signature Version 4, checked against the keys ``autoscaler serve`` knows.

Every boto3 and Airflow client already signs each request it sends with SigV4 (the Authorization
header, ``X-Amz-Date``, a signature over the method, path, query, the headers it names and the body's
SHA-256). Checking that signature against a configured secret authenticates an unchanged client, where
a bearer token would need each pipeline changed to send it. The canonical request, string to sign and
signature are botocore's own (``botocore.auth.SigV4Auth``), fed with what arrived, so the check is the
signing done in reverse by the library that signed it.

Source: AWS, "Signature Version 4 signing process" (create a canonical request, a string to sign, the
signing key, the signature); AWS allows a request's time to be 15 minutes from the server's.
"""

from __future__ import annotations

import calendar
import hashlib
import hmac
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

ALGORITHM = "AWS4-HMAC-SHA256"

_AUTHORIZATION = re.compile(
    r"^AWS4-HMAC-SHA256\s+Credential=(?P<key>[^/\s,]+)/(?P<date>\d{8})/(?P<region>[^/\s,]+)/(?P<service>[^/\s,]+)/aws4_request\s*,"
    r"\s*SignedHeaders=(?P<headers>[a-z0-9;._-]+)\s*,\s*Signature=(?P<signature>[0-9a-f]{64})\s*$"
)


class SignatureError(Exception):
    """A request that is not signed by a known key. ``code``: the AWS error code a client expects
    (``MissingAuthenticationTokenException``, ``UnrecognizedClientException``,
    ``InvalidSignatureException``); the message says what was wrong, never the secret."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Signer:
    """Who signed: the access key id, and the region and service its signature was scoped to."""

    access_key_id: str
    region: str
    service: str


def verify(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    secrets: Mapping[str, str],
    *,
    now_s: float | None = None,
    max_skew_s: float = 900.0,
) -> Signer:
    """Check a request's SigV4 signature; returns who signed it.

    ``url``: as the client addressed it (scheme, Host, path, query). ``headers``: name -> value,
    names in any case (a repeated header's values joined by commas). ``body``: the bytes received.
    ``secrets``: access key id -> secret access key. ``now_s``: Unix seconds (default: now).

    Raises SignatureError: no Authorization header or one not of AWS4-HMAC-SHA256; an unknown
    access key id; ``X-Amz-Date`` missing, unsigned, unreadable, more than ``max_skew_s`` from now
    or not the credential scope's date; the Host header unsigned; or a signature that does not
    match (a wrong secret, or a request changed on the way).
    """
    lower = {name.lower(): value for name, value in headers.items()}
    authorization = lower.get("authorization")
    if not authorization:
        raise SignatureError("MissingAuthenticationTokenException", "the request is not signed: no Authorization header (sign it with SigV4, as boto3 does)")
    match = _AUTHORIZATION.match(authorization.strip())
    if match is None:
        raise SignatureError("IncompleteSignatureException", f"Authorization header is not an {ALGORITHM} signature with Credential, SignedHeaders and Signature")
    key = match["key"]
    secret = secrets.get(key)
    if secret is None:
        raise SignatureError("UnrecognizedClientException", f"access key id {key!r} is not a caller of this endpoint ([[serve.callers]])")
    signed = match["headers"].split(";")
    for required in ("host", "x-amz-date"):
        if required not in signed:
            raise SignatureError("IncompleteSignatureException", f"the signature does not cover the {required} header")
    amz_date = lower.get("x-amz-date", "")
    try:
        signed_s = calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
    except ValueError:
        raise SignatureError("IncompleteSignatureException", f"X-Amz-Date {amz_date!r} is not a time like 20261205T093000Z") from None
    now_s = time.time() if now_s is None else now_s
    if abs(now_s - signed_s) > max_skew_s:
        raise SignatureError(
            "InvalidSignatureException",
            f"signature expired or not yet valid: signed at {amz_date}, {abs(now_s - signed_s):,.0f} s from the server's time "
            f"(at most {max_skew_s:,.0f} s allowed); check the client's clock",
        )
    if amz_date[:8] != match["date"]:
        raise SignatureError("InvalidSignatureException", f"credential scope date {match['date']} is not X-Amz-Date's {amz_date[:8]}")
    missing = [name for name in signed if name not in lower]
    if missing:
        raise SignatureError("InvalidSignatureException", f"signed headers {', '.join(missing)} are not in the request")
    claimed = lower.get("x-amz-content-sha256")
    if claimed is not None and claimed != hashlib.sha256(body).hexdigest():
        # The signature would cover the claim, not the body: a body the claim does not match is refused.
        raise SignatureError("InvalidSignatureException", f"X-Amz-Content-SHA256 {claimed[:64]!r} is not the body's SHA-256 (an unsigned payload is not accepted)")
    request = AWSRequest(method=method, url=url, data=body, headers={name: lower[name] for name in signed})
    request.context["timestamp"] = amz_date
    signer = SigV4Auth(Credentials(key, secret), match["service"], match["region"])
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if not hmac.compare_digest(expected, match["signature"]):
        raise SignatureError(
            "InvalidSignatureException",
            "the request signature does not match: check the secret access key configured for this access key id",
        )
    return Signer(access_key_id=key, region=match["region"], service=match["service"])
