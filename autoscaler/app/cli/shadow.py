"""``autoscaler run --shadow``: the shadow beside the cluster's own scaling (``autoscaler.app.shadow_run``)."""

from __future__ import annotations

import argparse

from rich.console import Console

from autoscaler.core.errors import ConfigError

SPEEDUP_DEFAULT = 1e9
"""``run --speedup``'s default (a replay's): any other value given with --shadow is refused."""

SHADOW_POLL_S = 10.0
"""``--shadow-poll-s``'s default: EMR managed scaling evaluates every 5-10 s."""


def run_shadow(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run shadow mode until SIGTERM or SIGINT. Raises ConfigError for a flag that shadow mode does not
    take (naming it), and what the start-up check of the cluster raises."""
    import structlog

    from autoscaler.adapters.health import Telemetry, serve
    from autoscaler.app import compose
    from autoscaler.app.cli.arguments import deadline_slots
    from autoscaler.app.daemon import DecisionsFile, run_forever
    from autoscaler.app.logs import configure_logging
    from autoscaler.app.shadow_run import shadow_watch

    if not args.shadow:
        raise ConfigError("run: --shadow-poll-s is for --shadow")
    refused = (
        ("--dry-run", args.dry_run or None), ("--replay", args.replay), ("--store", args.store), ("--policy", args.policy),
        ("--max-nodes", args.max_nodes), ("--tenants", args.tenants if args.tenants != 1 else None), ("--keep-store", args.keep_store or None),
        ("--containers-per-node", args.containers_per_node), ("--cluster", args.cluster), ("--objective", args.objective), ("--days", args.days),
        ("--lengths", args.lengths), ("--length-quantile", args.length_quantile), ("--length-error", args.length_error),
        ("--length-jitter", args.length_jitter), ("--seed", args.seed), ("--carbon", args.carbon), ("--carbon-unit", args.carbon_unit),
        ("--decommission-timeout-s", args.decommission_timeout_s), ("--speedup", args.speedup if args.speedup != SPEEDUP_DEFAULT else None),
    )  # fmt: skip
    for flag, value in refused:
        if value is not None:
            raise ConfigError(f"run --shadow: {flag} is not for shadow mode: it watches the cluster of --config with the config's policy")
    if args.shadow_poll_s is not None and args.shadow_poll_s < 1:
        raise ConfigError(f"--shadow-poll-s: expected at least 1 s between reads of the TASK group, got {args.shadow_poll_s:g}")
    settings = compose.settings(args.config)
    configure_logging(settings.log_format)
    deadline = None if args.deadline is None else deadline_slots(args.deadline, settings.slot_s)
    twin = compose.twin_config(settings, provision_s=args.provision_s, price_per_node_hour=args.price_per_node_hour, step_concurrency=args.step_concurrency)
    telemetry = Telemetry(settings.slot_s)
    decisions = DecisionsFile(args.decisions_out) if args.decisions_out is not None else None
    try:
        loop = shadow_watch(settings, deadline_slots=deadline, twin=twin, telemetry=telemetry, decisions=decisions)
        server = serve(telemetry, settings.health_host, settings.health_port)
        structlog.get_logger("autoscaler").info(
            "shadow_serving", policy=settings.policy, cluster_id=settings.cluster.id, metrics=f"http://{settings.health_host}:{server.server_port}/metrics"
        )
        try:
            daily = None
            if settings.report.daily:
                from autoscaler.app.shadow_run import shadow_daily_report

                if settings.report.email_to:
                    compose.mail_sender(settings)  # a missing SMTP password stops the shadow now, not at 00:10
                daily = lambda: shadow_daily_report(loop.shadow, settings)  # noqa: E731
            run_forever(loop, settings.slot_s, settings.misfire_grace_s, daily, args.shadow_poll_s or SHADOW_POLL_S)
        finally:
            server.shutdown()
    finally:
        if decisions is not None:
            decisions.close()
    return 0
