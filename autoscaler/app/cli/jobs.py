"""``autoscaler submit``, ``autoscaler jobs`` and ``autoscaler run``: the job queue and the daemon
that drains it (live, as a dry run, or driven by a replayed trace)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from rich.console import Console

from autoscaler.app.cli.arguments import (
    HelpFormatter,
    add_containers_argument,
    add_objective_argument,
    add_store_arguments,
    add_twin_arguments,
    deadline_slots,
    deadline_text,
    non_negative_float,
    open_store,
    positive_float,
    positive_int,
    twin_flags,
)
from autoscaler.app.cli.shadow import SPEEDUP_DEFAULT
from autoscaler.app.cli.trace_inputs import note_shadowed_file
from autoscaler.app.traces import TRACE_NAMES_HELP
from autoscaler.core.errors import ConfigError
from autoscaler.core.intake import SAME_DEADLINE_RULE
from autoscaler.core.lateness import LATE_HELP
from autoscaler.core.model import DEFAULT_MAX_NODES, JOB_STATES
from autoscaler.core.policies import ONLINE_POLICIES
from autoscaler.core.readable import count_text


def add_parsers(commands) -> None:
    """The submit, jobs and run commands."""
    submit = commands.add_parser(
        "submit",
        help="queue a job with a deadline for the daemon to release as an EMR step",
        description="Queue a job. Its length: --length-s (used as given), else a quantile of its name's past run "
        "times ([jobs] length_quantile, p90 by default; EMR's step start to end, per tenant and name), else, for a name "
        "never run, its three SWIM sizes (--sizes) to estimate it from; and its step: --command (run with command-runner.jar) or --jar with --args. "
        "With --id the submission is idempotent: the same id and content again changes nothing, and the "
        f"same id with other content is refused, saying what differs. For the deadline, {SAME_DEADLINE_RULE}.",
        formatter_class=HelpFormatter,
    )
    add_store_arguments(submit)
    submit.add_argument("--id", dest="job_id", default=None, help="client job id ([A-Za-z0-9._-], up to 64); makes resubmission safe")
    submit.add_argument("--name", required=True, help="job name")
    submit.add_argument("--tenant", required=True, help="tenant the job belongs to")
    submit.add_argument(
        "--deadline", required=True,
        help="a duration from now (90m, 2h, 1h30m, 600) or an ISO-8601 time with zone; retried with the same --id, "
        "the same duration keeps the first submission's deadline",
    )  # fmt: skip
    length_or_sizes = submit.add_mutually_exclusive_group()
    length_or_sizes.add_argument("--length-s", type=positive_float, help="estimated run time in seconds, used as given")
    length_or_sizes.add_argument(
        "--sizes", type=non_negative_float, nargs=3, metavar=("MAP_IN", "SHUFFLE", "REDUCE_OUT"),
        help="map input, shuffle and reduce output bytes; the length is estimated from them (§V-A) for a name never run, "
        "else learned from its past runs",
    )  # fmt: skip
    width = submit.add_argument_group(
        "width",
        "the whole TASK nodes the job runs on at once (default 1): --nodes, or its containers' vCPUs and memory in all, "
        "turned into nodes by a TASK node's YARN capacity (cluster.task_instance_type, or cluster.task_yarn_vcpus and "
        "task_yarn_memory_mb): max(ceil(V / node vCPUs), ceil(G / node GiB)). A width above cluster.max_nodes is refused",
    )
    width.add_argument("--nodes", type=positive_int, default=None, metavar="W", help="w, the TASK nodes the job runs on at once")
    width.add_argument("--vcpus", type=positive_float, default=None, metavar="V", help="vCPUs its containers take in all")
    width.add_argument("--memory-gb", type=positive_float, default=None, metavar="G", help="memory its containers take in all, GiB (1,024 MiB)")
    width.add_argument(
        "--container-vcpus", type=positive_float, default=None, metavar="V1",
        help="with --container-memory-gb: one container's ask; it must fit one node, and V and G become whole containers packed onto nodes",
    )  # fmt: skip
    width.add_argument("--container-memory-gb", type=positive_float, default=None, metavar="G1", help="one container's memory, GiB")
    submit.add_argument("--jar", help="jar to run (a path on the cluster or s3://...); its arguments follow --args")
    submit.add_argument("--main-class", default=None, help="main class for --jar")
    submit.add_argument(
        "--command", nargs=argparse.REMAINDER, action=RestOfLine, default=None,
        help="last option: everything after it is the command for command-runner.jar, dashes included "
        "(--command spark-submit --deploy-mode cluster app.py); a flag of submit's in it, such as --name, is refused "
        "unless submit was also given it before --command",
    )  # fmt: skip
    submit.add_argument(
        "--args", nargs=argparse.REMAINDER, action=RestOfLine, default=[],
        help="last option: everything after it is the arguments for --jar, dashes included; a flag of submit's "
        "in them is refused unless submit was also given it before --args",
    )  # fmt: skip
    submit.set_defaults(handler=_run_submit)

    jobs = commands.add_parser(
        "jobs",
        help="list the queued, released, running, done, failed, cancelled and late jobs",
        description=f"List the jobs of the store with their state, and whether each is late. A job is {LATE_HELP}.",
        formatter_class=HelpFormatter,
    )
    add_store_arguments(jobs)
    jobs.add_argument(
        "--state", choices=[*JOB_STATES, "late"], default=None,
        help="only jobs in this state, or only the late ones (in any state)",
    )  # fmt: skip
    jobs.add_argument("--format", choices=["table", "json"], default="table", help="stdout format")
    jobs.add_argument("--by-tenant", action="store_true", help="one row per tenant: jobs by state, late jobs (missed deadlines), dominant share")
    jobs.set_defaults(handler=_run_jobs)

    run = commands.add_parser(
        "run",
        help="run the daemon: every slot, decide capacity, resize the TASK group and release jobs",
        description="Run the slot loop against the EMR cluster of --config. --dry-run runs the same loop on a "
        "shadow of the store and a simulated cluster that starts from EMR's TASK group and follows the dry "
        "run's own decisions: it logs what the daemon would do, slot after slot, and changes nothing on the "
        "cluster or in the store. --shadow watches a cluster that its own scaling (EMR managed scaling) runs: it plays "
        "the policy on the cluster's own steps on the cluster twin and publishes, slot by slot, what it would have done "
        "and used against what the cluster used, and never writes to the cluster. --replay TRACE drives the same slot loop from a recorded trace with a "
        "simulated clock on the cluster twin (an EMR TASK group's boot delays, drains and bill; --cluster instant: "
        "nodes that appear at once), checks its capacity against `autoscaler replay` and prints the twin's bill. "
        "Settings come from --config and AUTOSCALER_* variables in every mode. With [carbon] source set and policy "
        "hold, run and run --dry-run decide as hold+carbon on that signal; run --replay is carbon-blind (it ignores [carbon]).",
        formatter_class=HelpFormatter,
    )
    run.add_argument("--config", type=Path, default=None, help="TOML config (fields also from AUTOSCALER_* variables)")
    run.add_argument("--dry-run", action="store_true", help="decide every slot as the daemon would, change nothing (with --replay: keep no store at all)")
    run.add_argument(
        "--shadow", action="store_true",
        help="beside the cluster's own scaling (EMR managed scaling): read its steps and TASK group, never write, and publish "
        "slot by slot what the policy would have done with those steps and the node-hours, kWh, $ and kgCO2 it would have "
        "used against what the cluster used (Prometheus, CloudWatch, --decisions-out); -D sets the steps' slack",
    )  # fmt: skip
    run.add_argument(
        "--shadow-poll-s", type=positive_float, default=None, metavar="S",
        help="shadow: seconds between reads of the TASK group, whose node count is held between reads (default 10: managed scaling's evaluation interval)",
    )  # fmt: skip
    run.add_argument("--decisions-out", type=Path, default=None, metavar="FILE", help="append one JSON line per slot: slot, m_t, nodes, released job ids, reason")
    run.add_argument("--replay", default=None, metavar="TRACE", help=f"replay a SWIM trace through the daemon, carbon-blind: {TRACE_NAMES_HELP}")
    run.add_argument("--speedup", type=positive_float, default=SPEEDUP_DEFAULT, help="replay: simulated seconds per real second")
    run.add_argument("--policy", choices=list(ONLINE_POLICIES), default=None, help="replay: policy (default: the config's, else hold)")
    run.add_argument(
        "--deadline", "-D", type=deadline_text, default=None,
        help="replay: deadline D for every job; shadow: the slack every step of the cluster is given, its deadline "
        "= its creation + its planned length + D. Slots (12), or a duration (2h, 90m) that is a whole number of the "
        "config's slot_s (default: the config's deadline_slots, else 2)",
    )  # fmt: skip
    run.add_argument("--store", type=Path, default=None, help="replay: job store file, kept (default: a temporary one, removed at exit)")
    run.add_argument("--keep-store", action="store_true", help="replay: keep the temporary store and print where it is")
    add_objective_argument(run, None, "; replay only (default: the config's objective, else energy)", paper_costs="the config's e0, e1, beta")
    run.add_argument("--max-nodes", type=positive_int, default=None, help=f"replay: most task nodes (default: the config's cluster.max_nodes, else {DEFAULT_MAX_NODES})")
    run.add_argument("--tenants", type=positive_int, default=1, help="replay: deal the trace's jobs to this many tenants in turn (fair shares under overload)")
    add_containers_argument(run, "replay: ")
    run.add_argument("--days", type=positive_int, default=None, help="replay: repeat the trace's day this many days, each job keeping its trace id as its name (recurring jobs; default 1)")
    run.add_argument(
        "--lengths", choices=["learned", "submitted"], default=None,
        help="replay: plan a job at a quantile of its name's past runs (learned, the default, as submit does) or at the length it was submitted with",
    )  # fmt: skip
    run.add_argument("--length-quantile", type=float, default=None, metavar="Q", help="replay: the quantile of past runs a learned length is (default: the config's [jobs] length_quantile, else 0.9)")
    twin = run.add_argument_group(
        "replay on the cluster twin",
        "the replay runs on the cluster twin, an EMR TASK group as it behaves and bills (autoscaler.core.twin): "
        "nodes usable --provision-s after the request, drains that kill a job at --decommission-timeout-s, "
        "true lengths apart from the estimates, and a bill of node-seconds, $, kWh (and kgCO2 with --carbon) at the end",
    )
    twin.add_argument(
        "--cluster", choices=["twin", "instant"], default=None,
        help="replay: the twin, or the in-memory cluster whose nodes appear at once (the paper's idealised one) "
        "(default: twin; EMR itself when the config's endpoint_url is on this machine, e.g. moto)",
    )  # fmt: skip
    add_twin_arguments(twin)
    run.set_defaults(handler=_run_daemon)


END_OF_OPTIONS = "\0--"
"""A '--' word of the job's own command line, as ``cli.main`` hands it to argparse: argparse would take
a bare '--' for the end of submit's options and stop --command there."""


class RestOfLine(argparse.Action):
    """An option that takes every word after it, dashes included (submit's --command and --args).

    One of the command's own flags among those words was meant for the command when the command was
    also given it before; one that was not given is refused by name, since it was written after this
    option by mistake (the job would run with it as an argument, or the command would say it is missing).
    After a '--' in the command, every word is the command's.
    """

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        values = ["--" if word == END_OF_OPTIONS else word for word in values]
        checked = values[: values.index("--")] if "--" in values else values
        swallowed = []
        for word in checked:
            flag = word.split("=", 1)[0]
            action = parser._option_string_actions.get(flag)
            if action is None or isinstance(action, RestOfLine) or action.default is argparse.SUPPRESS:
                continue
            if getattr(namespace, action.dest) == action.default and flag not in swallowed:
                swallowed.append(flag)
        if swallowed:
            parser.error(
                f"{option_string} takes the rest of the line, and it swallowed {', '.join(swallowed)}; "
                f"put {option_string} ... last"
            )
        setattr(namespace, self.dest, values)


def _run_submit(args: argparse.Namespace, out: Console, err: Console) -> int:
    from autoscaler.adapters.clock import submit_time
    from autoscaler.app.submission import Submission, planned_job
    from autoscaler.core.readable import utc_text

    if (args.command is None) == (args.jar is None):
        raise ConfigError("submit: give the step as --command ... (last) or as --jar JAR [--args ...]")
    if args.command is not None and not args.command:
        raise ConfigError("submit: --command needs the command after it")
    submission = Submission(
        name=args.name,
        tenant=args.tenant,
        deadline=args.deadline,
        job_id=args.job_id,
        length_s=args.length_s,
        sizes=tuple(args.sizes) if args.sizes else None,
        jar=args.jar,
        args=tuple(args.args),
        command=None if args.command is None else tuple(args.command),
        main_class=args.main_class,
        nodes=args.nodes,
        vcpus=args.vcpus,
        memory_gb=args.memory_gb,
        container_vcpus=args.container_vcpus,
        container_memory_gb=args.container_memory_gb,
    )
    store, settings = open_store(args)
    with store:
        stamp = submit_time(store.path)  # on the clock of the daemon running on the store
        job = planned_job(store, settings, submission, stamp.now_s, stamp.wall_minus_now_s)
        added = store.submit(job)
        if not added:
            job = store.job(job.job_id) or job  # or job: pruned by retention in between, as submitted
    out.print(f"{'queued' if added else 'already queued'}: {job.job_id}", highlight=False)
    if stamp.wall_minus_now_s:
        err.print(_stepped_text(stamp.wall_minus_now_s), highlight=False, soft_wrap=True)
    kept = "" if added else " (the first submission's)"
    err.print(f"deadline {utc_text(job.deadline_s)}, length {job.length_s:,.0f} s ({job.length_source}{_prior_text(job)}){kept}", highlight=False, soft_wrap=True)
    if job.submit_s + job.length_s > job.deadline_s:
        err.print(
            f"warning: {job.job_id}: planned at {job.length_s:,.0f} s, longer than the {job.deadline_s - job.submit_s:,.0f} s its "
            "deadline leaves: it is due at once and will end after its deadline if it runs as long as its name has",
            highlight=False, markup=False, soft_wrap=True,
        )  # fmt: skip
    if job.nodes != 1:
        err.print(f"width {count_text(job.nodes, 'node')}{kept}", highlight=False)
    return 0


def _stepped_text(wall_minus_now_s: float) -> str:
    from autoscaler.core.readable import duration_text

    way = "ahead of" if wall_minus_now_s > 0 else "behind"
    return (
        f"note: the wall clock is {duration_text(abs(wall_minus_now_s))} {way} the daemon's (it was stepped since the daemon "
        "started); the job is stamped on the daemon's clock, and the times shown are on it"
    )


def _prior_text(job) -> str:
    return "" if job.prior_length_s is None else f"; submitted as {job.prior_length_s:,.0f} s"


def _run_jobs(args: argparse.Namespace, out: Console, err: Console) -> int:
    from rich.table import Table

    from autoscaler.adapters.clock import submit_time
    from autoscaler.core.controller import ControllerConfig
    from autoscaler.core.lateness import slots_late

    store, settings = open_store(args, must_exist=True)
    with store:
        jobs = store.all_jobs()
        saved = store.load_state()
        last_slot = store.last_slot()
    config = settings.controller_config(0.0) if settings else ControllerConfig()
    now_s = submit_time(store.path).now_s  # lateness on the daemon's clock, as it counts it
    late = {job.job_id: slots_late(job, config, now_s, last_slot) for job in jobs}

    if args.by_tenant:
        if args.state:
            raise ConfigError("jobs: --by-tenant counts jobs in every state; leave out --state")
        return _print_tenants(jobs, late, saved or {}, args.format, out)
    if args.state == "late":
        jobs = [job for job in jobs if late[job.job_id]]
    elif args.state:
        jobs = [job for job in jobs if job.state == args.state]
    if args.format == "json":
        rows = [
            {**dataclasses.asdict(job), "shown_state": job.state, "late": late[job.job_id] > 0, "slots_late": late[job.job_id],
             "run_s": _run_s(job), "overran": job.overran}
            for job in jobs
        ]  # fmt: skip
        sys.stdout.write(json.dumps(rows) + "\n")
        return 0
    n_late = sum(1 for job in jobs if late[job.job_id])
    n_overran = sum(1 for job in jobs if job.overran)
    table = Table(
        title=f"{count_text(len(jobs), 'job')}, {n_late:,} late, {n_overran:,} overran (ended after the deadline)",
        caption=LATE_HELP if n_late else None,
    )
    columns = ["id", "name", "tenant", "nodes", "state", "late", "submitted (UTC)", "deadline (UTC)", "planned s", "from", "ran s", "overran", "step"]
    for column in columns:
        table.add_column(column, no_wrap=True)
    for job in jobs:
        behind = late[job.job_id]
        shown_late = "" if not behind else f"by {count_text(behind, 'slot')}"
        run_s = _run_s(job)
        table.add_row(
            job.job_id, job.name, job.tenant, f"{job.nodes:,}", job.state, shown_late, _utc(job.submit_s), _utc(job.deadline_s), f"{job.length_s:,.0f}",
            (job.length_source or "") + _prior_text(job), "" if run_s is None else f"{run_s:,.0f}",
            f"by {job.run_end_s - job.deadline_s:,.0f} s" if job.overran else "", job.step_id or "",
        )  # fmt: skip
    out.print(table)
    return 0



def _run_s(job) -> float | None:
    """How long the job's step ran (EMR's start to end), s; None until it has ended."""
    return None if job.run_end_s is None or job.run_start_s is None else job.run_end_s - job.run_start_s


def _print_tenants(jobs: list, late: dict[str, int], saved_state: dict, fmt: str, out: Console) -> int:
    """Per tenant: jobs by state, late jobs (``late``: {job id: slots late}, see autoscaler.core.lateness), jobs that
    overran (ended after their deadline), dominant share."""
    from rich.table import Table

    shares = dict(zip(saved_state.get("tenants", []), saved_state.get("dominant_shares", [])))
    rows = {}
    for job in jobs:
        row = rows.setdefault(job.tenant, {"tenant": job.tenant, "jobs": 0, **{s: 0 for s in JOB_STATES}, "missed": 0, "overran": 0})
        row["jobs"] += 1
        row[job.state] += 1
        row["missed"] += late[job.job_id] > 0
        row["overran"] += job.overran
    for tenant, row in rows.items():
        row["dominant_share"] = shares.get(tenant)
    if fmt == "json":
        sys.stdout.write(json.dumps(list(rows.values())) + "\n")
        return 0
    table = Table(title=f"{count_text(len(rows), 'tenant')} (in order of arrival; shares once the daemon has run)", caption=LATE_HELP)
    for column in ["tenant", "jobs", *JOB_STATES, "late (missed deadline)", "overran (ended after deadline)", "dominant share"]:
        table.add_column(column, justify="left" if column == "tenant" else "right")
    arrival = {tenant: i for i, tenant in enumerate(saved_state.get("tenants", []))}
    for tenant in sorted(rows, key=lambda t: (arrival.get(t, len(arrival)), t)):
        row = rows[tenant]
        share = "" if row["dominant_share"] is None else f"{row['dominant_share']:.4f}"
        table.add_row(tenant, f"{row['jobs']:,}", *(f"{row[s]:,}" for s in JOB_STATES), f"{row['missed']:,}", f"{row['overran']:,}", share)
    out.print(table)
    return 0


def _utc(seconds: float) -> str:
    import datetime

    try:
        return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, ValueError, OSError):
        return f"{seconds:.0f} s"


def _replay_request(args: argparse.Namespace, slot_s: float):
    """``run --replay``'s flags as a :class:`autoscaler.app.replay_daemon.ReplayRequest`; --deadline in slots of ``slot_s``."""
    from autoscaler.app.replay_daemon import ReplayRequest

    deadline = None if args.deadline is None else deadline_slots(args.deadline, slot_s)
    return ReplayRequest(
        trace=args.replay, speedup=args.speedup, policy=args.policy, deadline_slots=deadline, max_nodes=args.max_nodes,
        tenants=args.tenants, containers_per_node=args.containers_per_node, days=args.days, lengths=args.lengths,
        length_quantile=args.length_quantile, store=args.store, keep_store=args.keep_store, dry_run=args.dry_run,
        decisions_out=args.decisions_out, cluster=args.cluster, twin=twin_flags(args),
    )  # fmt: skip


def _run_daemon(args: argparse.Namespace, out: Console, err: Console) -> int:
    from autoscaler.app import compose
    from autoscaler.app.logs import configure_logging

    if args.decisions_out is not None:
        compose.require_folder(args.decisions_out, "--decisions-out")
        compose.require_writable(args.decisions_out, "--decisions-out")
    if args.shadow and args.replay is not None:
        raise ConfigError("run --shadow: --replay is not for shadow mode: it watches the cluster of --config as it runs")
    if args.replay is not None:
        from autoscaler.app.config import refuse_carbon_objective, with_objective
        from autoscaler.app.replay_daemon import replay_through_daemon

        settings = with_objective(compose.settings(args.config, cluster_required=False), args.objective)
        refuse_carbon_objective(settings, "run --replay")
        configure_logging(settings.log_format)
        note_shadowed_file(args.replay, "--replay", err)
        return replay_through_daemon(_replay_request(args, settings.slot_s), settings, out, err)
    if args.config is None:
        if args.shadow:
            raise ConfigError("run --shadow: --config FILE is required: shadow mode watches the cluster of --config")
        raise ConfigError("run: --config FILE is required (or --replay TRACE for a simulated run)")
    if args.shadow or args.shadow_poll_s is not None:
        from autoscaler.app.cli.shadow import run_shadow

        return run_shadow(args, out, err)
    for flag, value in (("--store", args.store), ("--policy", args.policy), ("--deadline", args.deadline), ("--max-nodes", args.max_nodes), ("--tenants", args.tenants if args.tenants != 1 else None), ("--containers-per-node", args.containers_per_node), ("--keep-store", args.keep_store or None), ("--cluster", args.cluster), ("--objective", args.objective), ("--days", args.days), ("--lengths", args.lengths), ("--length-quantile", args.length_quantile)):
        if value is not None:
            raise ConfigError(f"run: {flag} is for --replay; a live run takes it from the config")
    import structlog

    from autoscaler.adapters.health import Telemetry, serve
    from autoscaler.app.daemon import DecisionsFile, run_forever

    settings = compose.settings(args.config)
    configure_logging(settings.log_format)
    decisions = DecisionsFile(args.decisions_out) if args.decisions_out is not None else None  # checked above
    telemetry = Telemetry(settings.slot_s)
    try:
        with compose.daemon_runner(settings, dry_run=args.dry_run, telemetry=telemetry, on_decision=decisions) as runner:
            server = serve(telemetry, settings.health_host, settings.health_port)
            structlog.get_logger("autoscaler").info("serving", healthz=f"http://{settings.health_host}:{server.server_port}/healthz", metrics=f"http://{settings.health_host}:{server.server_port}/metrics")
            daily = None
            if settings.report.daily and not args.dry_run:
                from autoscaler.app.reporting import daily_report, mail_sender

                if settings.report.email_to:
                    mail_sender(settings)  # a missing SMTP password stops the daemon now, not at 00:10
                daily = lambda: daily_report(settings)  # noqa: E731
            try:
                run_forever(runner, settings.slot_s, settings.misfire_grace_s, daily, settings.release_poll_s)
            finally:
                server.shutdown()
    finally:
        if decisions is not None:
            decisions.close()
    return 0
