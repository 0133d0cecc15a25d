"""The project's exceptions: one root, one subclass per kind of failure."""

from __future__ import annotations


class AutoscalerError(Exception):
    """Root of every error this project raises on purpose."""


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


class MetricsError(AutoscalerError):
    """CloudWatch metrics cannot be read or published after retries, or CloudWatch's answer does not fit
    the request (an unknown query id, a datapoint off the slot grid); names the operation and AWS error code."""


class ReportError(AutoscalerError):
    """A result cannot be written as asked (a number JSON cannot hold); names the field."""
