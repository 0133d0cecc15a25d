"""``autoscaler serve`` over HTTP: the ASGI application (starlette) that speaks EMR's JSON protocol in
front of :class:`autoscaler.app.serve.StepGateway`, and the uvicorn listener it runs on.

Each request: the body (refused past MAX_BODY_BYTES before it is read whole), its SigV4 signature
checked (:mod:`autoscaler.adapters.sigv4`; 403 and nothing stored when it fails), the operation from
``X-Amz-Target``, then the gateway's answer or its error as EMR writes errors (``__type``, ``message``).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping

import structlog

from autoscaler.adapters.sigv4 import SignatureError, verify
from autoscaler.app.serve import EmrApiError, StepGateway
from autoscaler.core.errors import StoreError

log = structlog.get_logger("autoscaler")

TARGET_PREFIX = "ElasticMapReduce."
SERVICE = "elasticmapreduce"
"""EMR's JSON protocol: ``X-Amz-Target: ElasticMapReduce.<Operation>``, signed for this service."""

MAX_BODY_BYTES = 2 * 1024 * 1024
"""The largest request body read: 256 steps of a few kilobytes each fit many times over."""

MESSAGE_MAX_CHARS = 2_000
"""An error message is cut to this length: it may quote what was sent."""

GRACEFUL_SHUTDOWN_S = 10.0
"""At SIGINT or SIGTERM, requests under way get this long to finish (a client that sends its body
slowly is cut off then), so a stop never waits on a client."""


def _wire(value):
    """A response as EMR's JSON protocol writes it: the datetimes boto3 gave back as Unix seconds."""
    if isinstance(value, dict):
        return {key: _wire(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_wire(item) for item in value]
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    return value


def build_app(gateway: StepGateway, secrets: Mapping[str, str], max_skew_s: float = 900.0):
    """The ASGI application (starlette): POST / with ``X-Amz-Target``; every request is checked by its
    SigV4 signature first, and nothing is stored for one that fails (403). A body over MAX_BODY_BYTES
    is refused (413) before it is read whole."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    def error_response(code: str, message: str, status: int) -> Response:
        if len(message) > MESSAGE_MAX_CHARS:
            message = f"{message[:MESSAGE_MAX_CHARS]}... (message cut at {MESSAGE_MAX_CHARS:,} characters)"
        return JSONResponse({"__type": code, "message": message}, status_code=status, media_type="application/x-amz-json-1.1")

    async def read_body(request: Request) -> bytes | None:
        """The body, or None past MAX_BODY_BYTES (by its Content-Length, else as it streams in)."""
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            return None
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    def handle(method: str, url: str, headers: dict, body: bytes) -> tuple[int, dict]:
        signer = verify(method, url, headers, body, secrets, max_skew_s=max_skew_s)
        if signer.service != SERVICE:
            raise SignatureError("InvalidSignatureException", f"the request is signed for service {signer.service!r}, expected {SERVICE!r}")
        caller = gateway.callers[signer.access_key_id]
        target = headers.get("x-amz-target", "")
        if not target.startswith(TARGET_PREFIX):
            raise EmrApiError("UnknownOperationException", f"X-Amz-Target {target!r}: expected ElasticMapReduce.<Operation>")
        operation = target[len(TARGET_PREFIX):]
        try:
            request_body = json.loads(body or b"{}")
        except (ValueError, RecursionError):
            raise EmrApiError("SerializationException", "the body is not JSON (or nests too deep)") from None
        if not isinstance(request_body, dict):
            raise EmrApiError("SerializationException", "the body is not a JSON object")
        if operation == "AddJobFlowSteps":
            return 200, gateway.add_steps(caller, request_body, headers.get("amz-sdk-invocation-id"))
        if operation == "DescribeStep":
            return 200, gateway.describe_step(caller, request_body)
        if operation == "ListSteps":
            return 200, gateway.list_steps(caller, request_body)
        if operation == "CancelSteps":
            return 200, gateway.cancel_steps(caller, request_body)
        return 200, gateway.pass_through(operation, request_body)

    async def endpoint(request: Request) -> Response:
        body = await read_body(request)
        if body is None:
            return error_response("RequestEntityTooLarge", f"the request body is over {MAX_BODY_BYTES:,} bytes; nothing was read further or stored", 413)
        headers = {name.lower(): value for name, value in request.headers.items()}
        url = str(request.url)
        try:
            status, answer = await run_in_threadpool(handle, request.method, url, headers, body)
        except SignatureError as error:
            log.warning("request_refused", reason=error.code, detail=str(error), client=request.client.host if request.client else None)
            return error_response(error.code, str(error), 403)
        except EmrApiError as error:
            return error_response(error.code, str(error), error.status)
        except StoreError as error:
            log.error("store_failed", error=str(error))
            return error_response("InternalServerError", f"the job store failed: {error}", 500)
        return JSONResponse(_wire(answer), status_code=status, media_type="application/x-amz-json-1.1")

    return Starlette(routes=[Route("/", endpoint, methods=["POST"])])


class Listener:
    """The app on uvicorn, on a socket bound (and listening) as soon as this is made: ``port`` is the
    port taken (``port`` 0 picks a free one), and a client may connect before ``serve`` runs.

    ``serve()`` blocks until SIGINT or SIGTERM in the main thread (uvicorn's graceful shutdown);
    ``start()`` serves in a thread and ``stop()`` ends it (tests, benchmarks). ``certfile`` and
    ``keyfile``: PEM files for TLS, both or neither. Raises OSError when the address cannot be bound.
    """

    def __init__(self, app, host: str, port: int, certfile: str | None = None, keyfile: str | None = None) -> None:
        import socket

        import uvicorn

        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.create_server((host, port), family=family, backlog=2048)
        self.host, self.port = host, self.socket.getsockname()[1]
        self.scheme = "https" if certfile else "http"
        config = uvicorn.Config(
            # log_config None: uvicorn's loggers go to the root logger, so its lines are in our format (JSON), not its own text.
            app, ssl_certfile=certfile, ssl_keyfile=keyfile, log_level="warning", log_config=None, lifespan="off", backlog=2048,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        )  # fmt: skip
        self.server = uvicorn.Server(config)
        self._thread = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def serve(self) -> None:
        self.server.run(sockets=[self.socket])

    def start(self) -> "Listener":
        import threading

        self._thread = threading.Thread(target=self.serve, name="serve", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s)
        self.socket.close()
