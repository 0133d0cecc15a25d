"""The project's exceptions: one root, one subclass per kind of failure."""

from __future__ import annotations


class AutoscalerError(Exception):
    """Root of every error this project raises on purpose. ``exit_status``: what the CLI exits with
    when it stops on this error (2: bad input or a wrong setting, which a restart cannot mend)."""

    exit_status = 2


class ConfigError(AutoscalerError):
    """A parameter or option is out of range, unknown or inconsistent."""


class TraceError(AutoscalerError):
    """A trace or load-curve file cannot be read; names the file and line."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")


class SolverError(AutoscalerError):
    """A solve did not reach an optimal solution; carries the solver's status."""

    def __init__(self, message: str, status: str) -> None:
        self.status = status
        super().__init__(f"{message} (solver status: {status})")


class InfeasibleError(SolverError):
    """No schedule meets every deadline within the server cap M."""


class ScheduleError(AutoscalerError):
    """A computed schedule breaks a constraint (C1, C2, 0 <= x <= m <= M, all work done)."""


class SubmitError(AutoscalerError):
    """A job submission is refused (bad deadline, step, tenant, or a conflicting id); nothing is stored."""


class StoreError(AutoscalerError):
    """The job store cannot be opened or is not ours (corrupt or foreign file); it is never overwritten."""


class ActuationError(AutoscalerError):
    """A call to the cluster (EMR) failed after retries. ``permanent``: AWS refused the request
    itself (a validation error), so repeating it will not help."""

    def __init__(self, message: str, permanent: bool = False) -> None:
        self.permanent = permanent
        super().__init__(message)


class DeliveryError(AutoscalerError):
    """A report could not be delivered (SMTP or SES); names the transport and the server's answer,
    never a credential. ``transport``: "smtp" or "ses"."""

    def __init__(self, message: str, transport: str) -> None:
        self.transport = transport
        super().__init__(message)


class ClusterError(ConfigError):
    """The configured EMR cluster cannot be run against: EMR has no such cluster in the region used,
    it has ended, it uses instance fleets, or it has no TASK instance group. Names the setting
    (``cluster.id``, ``cluster.region``) and its value. Permanent: exit status 2."""


class OutageError(AutoscalerError):
    """AWS kept failing with errors that pass (throttling, 5xx, connection errors) for the whole
    start-up wait. Names the operation, the last error and how long it was tried. Exit status 75
    (EX_TEMPFAIL, sysexits.h): the same start may succeed later, so a service manager restarts it.

    ``waited_s``: seconds from the first try to giving up; ``tries``: start-up tries made (each one
    with botocore's own retries inside)."""

    exit_status = 75

    def __init__(self, message: str, waited_s: float, tries: int) -> None:
        self.waited_s = waited_s
        self.tries = tries
        super().__init__(message)


class MetricsError(AutoscalerError):
    """CloudWatch metrics cannot be read or published after retries, or CloudWatch's answer does not fit
    the request (an unknown query id, a datapoint off the slot grid); names the operation and AWS error code."""


class ReportError(AutoscalerError):
    """A result cannot be written as asked (a number JSON cannot hold); names the field."""
