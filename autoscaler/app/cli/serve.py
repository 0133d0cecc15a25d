"""``autoscaler serve``: the EMR-compatible step endpoint (``autoscaler.app.serve``) on uvicorn."""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

from rich.console import Console

from autoscaler.app.cli.arguments import HelpFormatter
from autoscaler.core import defaults


def add_parsers(commands) -> None:
    """The serve command."""
    serve = commands.add_parser(
        "serve",
        help="an EMR-compatible endpoint: unchanged boto3 and Airflow clients submit deferrable steps to it",
        description="Listen for EMR's JSON API (AddJobFlowSteps, DescribeStep, ListSteps, CancelSteps; other read-only "
        "calls on the managed cluster pass through to EMR). Each AddJobFlowSteps step is queued in the store of --config "
        "as a job, for `autoscaler run` to release by deadline; its deadline, tenant, length and width come from the "
        "step properties autoscaler.deadline, autoscaler.tenant, autoscaler.length_s and autoscaler.nodes, else from "
        "its caller's defaults. Requests are authenticated by their SigV4 signature against [[serve.callers]] "
        "(access_key_id, secret_env or secret_file, tenants); a caller acts only for its own tenants. Beyond "
        "127.0.0.1 it listens only with TLS ([serve] tls_certfile, tls_keyfile). See docs/front-door.md.",
        formatter_class=HelpFormatter,
    )
    serve.add_argument("--config", type=Path, required=True, help="TOML config: cluster.id, store_path and [serve] with its callers")
    serve.add_argument("--host", default=None, help="address to listen on (default: [serve] host, else 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help=f"port (default: [serve] port, else {defaults.SERVE_PORT}; 0 picks a free one)")
    serve.set_defaults(handler=_run_serve)


def _run_serve(args: argparse.Namespace, out: Console, err: Console) -> int:
    import structlog
    from pydantic import ValidationError

    from autoscaler.adapters.emr import emr_client
    from autoscaler.adapters.sqlite_store import SqliteJobStore
    from autoscaler.app.config import ServeSettings, describe_error, load_settings
    from autoscaler.app.logs import configure_logging
    from autoscaler.app.serve import gateway_from_settings
    from autoscaler.app.serve_http import Listener, build_app
    from autoscaler.core.errors import ConfigError

    settings = load_settings(args.config)
    serve = settings.serve
    if args.host is not None or args.port is not None:
        try:
            serve = ServeSettings(**(serve.model_dump() | {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}))
        except ValidationError as error:
            raise ConfigError("serve: " + "; ".join(describe_error(problem) for problem in error.errors())) from None
    if serve.tls_certfile is not None:
        _check_tls(serve.tls_certfile, serve.tls_keyfile)
    configure_logging(settings.log_format)
    store = SqliteJobStore(settings.store_path, flag="store_path")
    with store:
        emr = emr_client(settings.cluster.region, settings.cluster.endpoint_url)
        gateway, secrets = gateway_from_settings(settings, store, emr)
        app = build_app(gateway, secrets, serve.max_clock_skew_s)
        listener = Listener(app, serve.host, serve.port, *(str(path) if path else None for path in (serve.tls_certfile, serve.tls_keyfile)))
        # A signal before uvicorn takes over (or the one uvicorn raises again after its graceful stop,
        # once its own handlers are gone) lands here: serve stops, with status 0, and says so.
        stopped = []

        def stop(received, _frame) -> None:
            stopped.append(signal.Signals(received).name)
            listener.server.should_exit = True

        for number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(number, stop)
        # In the log's format (JSON lines by default off a terminal), as the daemon's "serving": the
        # socket is bound before it.
        structlog.get_logger("autoscaler").info(
            "serving", what="EMR steps", cluster_id=settings.cluster.id, url=listener.url, callers=len(secrets), store=str(settings.store_path)
        )
        if not stopped:
            listener.serve()
        structlog.get_logger("autoscaler").info("stopping", signal=stopped[0] if stopped else None)
    return 0


def _check_tls(certfile, keyfile) -> None:
    """ConfigError naming the files unless they are a PEM certificate and its key: checked before
    listening, so a mistake is not found by the first client."""
    import ssl

    from autoscaler.core.errors import ConfigError

    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(str(certfile), str(keyfile))
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(
            f"serve: tls_certfile {str(certfile)!r} and tls_keyfile {str(keyfile)!r}: expected a PEM certificate and its private key "
            f"({error.strerror or error})"
        ) from None
