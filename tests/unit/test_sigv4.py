"""The SigV4 check of ``autoscaler serve``: requests signed by botocore's own signer, then verified;
any change on the way, a wrong secret, an old signature or an unsigned header is refused."""

from __future__ import annotations

import calendar
import hashlib
import time

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from autoscaler.adapters.sigv4 import SignatureError, verify

KEY, SECRET = "AKIAEXAMPLECALLER001", "a-secret-access-key"
URL = "http://127.0.0.1:8788/"
BODY = b'{"JobFlowId": "j-1", "Steps": []}'
SIGNED_AT = "20261205T093000Z"
SIGNED_S = calendar.timegm(time.strptime(SIGNED_AT, "%Y%m%dT%H%M%SZ"))


def signed(body: bytes = BODY, secret: str = SECRET, when: str = SIGNED_AT, extra: dict | None = None) -> dict:
    """The headers botocore sends for an EMR call signed at ``when``."""
    headers = {"Host": "127.0.0.1:8788", "X-Amz-Target": "ElasticMapReduce.AddJobFlowSteps", "X-Amz-Date": when, **(extra or {})}
    request = AWSRequest(method="POST", url=URL, data=body, headers=headers)
    request.context["timestamp"] = when
    signer = SigV4Auth(Credentials(KEY, secret), "elasticmapreduce", "us-east-1")
    canonical = signer.canonical_request(request)
    signature = signer.signature(signer.string_to_sign(request, canonical), request)
    scope = f"{KEY}/{when[:8]}/us-east-1/elasticmapreduce/aws4_request"
    headers = dict(request.headers.items())
    headers["Authorization"] = f"AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders={signer.signed_headers(signer.headers_to_sign(request))}, Signature={signature}"
    return headers


def test_a_request_signed_with_the_known_secret_is_its_caller():
    signer = verify("POST", URL, signed(), BODY, {KEY: SECRET}, now_s=SIGNED_S + 60)
    assert (signer.access_key_id, signer.region, signer.service) == (KEY, "us-east-1", "elasticmapreduce")


@pytest.mark.parametrize(
    "change, code",
    [
        (lambda h, b: (h, b.replace(b"j-1", b"j-2")), "InvalidSignatureException"),  # the body changed on the way
        (lambda h, b: ({**h, "X-Amz-Target": "ElasticMapReduce.CancelSteps"}, b), "InvalidSignatureException"),  # a signed header changed
        (lambda h, b: ({k: v for k, v in h.items() if k != "Authorization"}, b), "MissingAuthenticationTokenException"),
        (lambda h, b: ({**h, "Authorization": "Bearer abc"}, b), "IncompleteSignatureException"),
        (lambda h, b: ({**h, "X-Amz-Date": "yesterday"}, b), "IncompleteSignatureException"),
        (lambda h, b: ({**h, "X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"}, b), "InvalidSignatureException"),
    ],
    ids=["body", "header", "no-authorization", "not-sigv4", "bad-date", "unsigned-payload"],
)
def test_a_request_changed_after_signing_is_refused(change, code):
    headers, body = change(signed(), BODY)
    with pytest.raises(SignatureError) as refused:
        verify("POST", URL, headers, body, {KEY: SECRET}, now_s=SIGNED_S)
    assert refused.value.code == code


def test_a_wrong_secret_an_unknown_key_and_an_old_signature_are_refused():
    with pytest.raises(SignatureError, match="does not match") as wrong:
        verify("POST", URL, signed(secret="guessed"), BODY, {KEY: SECRET}, now_s=SIGNED_S)
    assert wrong.value.code == "InvalidSignatureException"
    with pytest.raises(SignatureError) as unknown:
        verify("POST", URL, signed(), BODY, {"AKIAOTHER": SECRET}, now_s=SIGNED_S)
    assert unknown.value.code == "UnrecognizedClientException"
    # 15 minutes is allowed either way; 15 minutes and a second is not (a replayed request).
    verify("POST", URL, signed(), BODY, {KEY: SECRET}, now_s=SIGNED_S + 900)
    with pytest.raises(SignatureError, match="expired or not yet valid"):
        verify("POST", URL, signed(), BODY, {KEY: SECRET}, now_s=SIGNED_S + 901)
    with pytest.raises(SignatureError, match="expired or not yet valid"):
        verify("POST", URL, signed(), BODY, {KEY: SECRET}, now_s=SIGNED_S - 901)


def test_a_payload_hash_header_must_be_the_bodys():
    good = hashlib.sha256(BODY).hexdigest()
    headers = signed(extra={"X-Amz-Content-SHA256": good})
    assert verify("POST", URL, headers, BODY, {KEY: SECRET}, now_s=SIGNED_S).access_key_id == KEY
    with pytest.raises(SignatureError, match="is not the body's SHA-256"):
        verify("POST", URL, headers, BODY + b" ", {KEY: SECRET}, now_s=SIGNED_S)


def test_the_aws_signature_v4_test_suites_get_vanilla_request_verifies():
    # AWS's published SigV4 test suite, case get-vanilla: its request, key, secret and signature.
    headers = {
        "Host": "example.amazonaws.com",
        "X-Amz-Date": "20150830T123600Z",
        "Authorization": "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
    }
    secrets = {"AKIDEXAMPLE": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
    now_s = calendar.timegm(time.strptime("20150830T123600Z", "%Y%m%dT%H%M%SZ"))
    assert verify("GET", "https://example.amazonaws.com/", headers, b"", secrets, now_s=now_s).service == "service"
    with pytest.raises(SignatureError, match="does not match"):
        verify("GET", "https://example.amazonaws.com/?a=1", headers, b"", secrets, now_s=now_s)
