"""The defaults every path starts from (the controller, the config file, the command line, the replay,
the energy report), each stated once. Times in seconds, deadlines in slots, costs per server-slot.

Source: the paper's simulation (paper: deferral, §VI-A): 5-minute slots, e0 = 1, e1 = 0, beta = 12
(used as given under objective "paper"), a two-slot deadline; the rest are the daemon's own choices,
explained beside each.
"""

from __future__ import annotations

import math

POLICY = "hold"
"""The policy the daemon runs unless told otherwise (the policy table's first online policy)."""

SLOT_S = 300.0
"""tau, the slot length: 5 minutes (paper: deferral, §VI-A)."""

RELEASE_POLL_S = 30.0
"""How often, between slot boundaries, the daemon looks for newly submitted jobs that cannot wait for
the next slot and releases them (0: only at slot boundaries), s."""

DEADLINE_SLOTS = 2
"""D, the deadline hold, gcp-u and vfw give every unit of work, in slots."""

MAX_DEADLINE_SLOTS = 288
"""The largest deadline gcp tracks one by one, in slots (a day of 5-minute slots); a later one
counts as due at that horizon."""

OBJECTIVE = "energy"
"""What eq. (2) is priced in unless told otherwise (``autoscaler.core.objective``): the power model's
watt-hours, since the tool is sold as saving energy; the paper's e0, e1, beta below apply under "paper"."""

RESTART_PENALTY = 0.0
"""What a restart costs beyond its boot energy or bill (wear, risk), in the objective's unit: nothing."""

E0 = 1.0
"""e0, the operating cost of a server on for one slot (paper: deferral, eq. (1)); objective "paper" only."""

E1 = 0.0
"""e1, the operating cost of one unit of work run in a slot (paper: deferral, eq. (1))."""

BETA = 12.0
"""beta, the cost of switching one server on or off (paper: deferral, eq. (2))."""

BOOT_S = 300.0
"""Seconds a started node draws idle power before it does work (one slot of the default length)."""

PROVISION_S = 330.0
"""Seconds from a resize up to a usable TASK node: EMR's 5-6 minutes, their middle. The twin's nodes
take it, and the daemon counts it (``provision_s``): in the release margin and in a restart's cost."""

WORK_MODEL = "node-seconds"
"""How the daemon counts work unless told otherwise (``work_model``): the node time an operator pays
for. "job-slots" is the paper's active-job model (a job is a whole node in every slot it touches)."""

MAX_NODES = 100
"""The most task nodes the daemon asks for unless told otherwise (``cluster.max_nodes``, ``--max-nodes``)."""

RELEASE_MARGIN_SLOTS = 1
"""g, how many slots before its start-by slot a queued job is due: one undecided slot (a restart)
never makes a job late."""

TENANTS_N = 10
"""n, the tenants dynamic DRF plans for when any tenant may submit (no ``known_tenants``)."""

PRUNE_ROWS_PER_COMMIT = 2_000
"""Most jobs, and separately most decisions, one ``commit_slot`` deletes for retention: a backlog (the
first slot with retention on a store that has run for months) is worked off over several slots
instead of stalling one. A deleted job costs about 5 us (its row and four index entries; measured by
``benchmarks/bench_store.py`` on a store of 1.1 million jobs), so the bound adds at most ~10 ms to a
slot, and still deletes far more than a slot finishes (at 5-minute slots, 576,000 jobs a day)."""

MAX_COST = 1e12
"""The largest e0, e1, beta or restart_penalty a config takes (in any unit): beyond it eq. (2)'s sums of
a year of slots overflow float64's precision, and hold's costs turn into inf - inf = NaN."""

LENGTH_QUANTILE = 0.9
"""The quantile of a job name's past run times it is planned at (``[jobs] length_quantile``): p90, so
about one run in ten of a steady job runs longer than planned."""

LEARNED_RUNS = 50
"""The newest runs of a name a learned length is drawn from: enough for a p90 to mean something, few
enough that a job that changed (more data, new code) is learned again within weeks of daily runs."""

LENGTH_ERROR_QUANTILE = 0.999
"""The quantile of finished jobs' run time / planned length that a new job's start is planned with room
for (``[jobs] length_error_quantile``; ``autoscaler.core.learned.LengthErrors``): p99.9, the second
longest of 1,000 runs, so about one job in a thousand held back to its start-by slot runs past its
deadline for a length planned too short. The room costs little: it moves a start earlier by
(ratio - 1) x length, small beside a deadline of hours for jobs of minutes (FB-2009 with lengths off by
lognormal(0, 1): +0.3 % kWh against no room, jobs that overran at 2 h 130 -> 46 on Workload A)."""

LENGTH_ERROR_RUNS = 1_000
"""The newest finished runs whose length error a new job's margin is drawn from: enough that a p99
is the 10th largest, few enough that a change of load is learned within a day."""

LENGTH_ERROR_MIN_RUNS = 20
"""Finished runs needed before any margin is planned: fewer say too little of the error's tail."""

LEARNED_MIN_RUNS = 1
"""Runs of a name needed before its learned length replaces the submitted one: one. A recurring job's
run is better evidence of its next run than a size model that 3Sigma finds off by 2x for 8-23 % of jobs."""

CARBON_MAX_REGRET = math.inf
"""hold+carbon's regret cap against follow, a share of follow's emissions (``[carbon] max_regret``);
off (inf) by default: its books look back over 3D+1 slots, and on the French grid of 2020 a cap of
0.01 caught none of the days above follow and cut the perfect forecast's median kept at 6 h on the
three-day load from 0.93 to 0.76 (:data:`autoscaler.core.policies.carbon.DEFAULT_MAX_REGRET`)."""

CARBON_SHORT_DEFERRAL_S = 7200.0
"""How far hold+carbon defers when it cannot trust its forecast or is over its regret cap, seconds (at
least hold's break-even W; ``[carbon] short_deferral_s``;
:func:`autoscaler.core.policies.carbon.short_deadline_slots`)."""

RETENTION_DAYS = 30.0
"""Days finished jobs (released, or submitted if never released) and slot decisions are kept in the
store before a slot prunes them (``retention_days``)."""

HEALTH_PORT = 9464
"""The port of /healthz and Prometheus /metrics (``health_port``): the one Prometheus's list of
default ports gives exporters of this kind."""

BLOCK_MB = 128.0
"""The HDFS block size, MB (MiB): one mapper per block (paper: deferral, §V-A)."""

MAP_S_PER_MB = 0.8
"""f(x) = this * x: a mapper's compute seconds per MB of input (paper: deferral, §V-A)."""

REDUCE_S_PER_MB = 0.9
"""g(x) = this * x: a reducer's compute seconds per MB of shuffle (paper: deferral, §V-A)."""

READ_MB_S = 100.0
"""V_i, the rate data is read at, MB/s (paper: deferral, §V-A)."""

WRITE_MB_S = 100.0
"""V_o, the rate output is written at, MB/s (paper: deferral, §V-A)."""

NETWORK_MB_S = 10.0
"""V_n, the network transfer rate of the shuffle, MB/s (paper: deferral, §V-A)."""

SERVE_PORT = 8788
"""``autoscaler serve``'s port ([serve] port)."""

SERVE_DEADLINE = "2h"
"""A step's deadline at ``autoscaler serve`` when neither the step nor its caller sets one."""
