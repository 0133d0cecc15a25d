"""Delivery of the daily energy report by email: over SMTP (``SmtpSender``) or Amazon SES (``SesSender``).

``build_report_message`` makes the message (pure: a text body and attachments such as the PNG
chart). Both senders take that message, block until the server has accepted it, log one
``report_sent`` event without credentials, and return the message id. A failure is raised as
``DeliveryError`` naming the transport and the server's answer; a password never appears in
an error or a log event.

Retries: SES calls go through botocore's standard retry mode (``ses_client``). An SMTP send is
one attempt: a report is resent at the next report slot, and repeating a send inside one slot
could deliver the same report twice when only the server's final answer was lost.
"""

from __future__ import annotations

import email.policy
import os
import smtplib
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import formatdate, getaddresses, make_msgid
from pathlib import Path

import boto3
import structlog
from botocore.client import BaseClient
from botocore.exceptions import BotoCoreError, ClientError

from autoscaler.adapters.aws import aws_client
from autoscaler.core.errors import ConfigError, DeliveryError

log = structlog.get_logger("autoscaler")


MESSAGE_POLICY = email.policy.SMTP.clone(cte_type="7bit")
"""How messages are built and serialised: CRLF line ends (RFC 5322, for SMTP and SES alike) and
7-bit transfer encodings only, so a non-ASCII body is quoted-printable or base64 and the message
passes through servers that do not offer 8BITMIME."""

BODY_SUBTYPES = ("plain", "markdown")
"""Allowed subtypes of the text body: text/plain (shown inline by every mail client) or
text/markdown (RFC 7763; some clients show it as an attachment instead)."""

SMTP_SUBMISSION_PORT = 587


def build_report_message(
    sender: str,
    recipients: Sequence[str],
    subject: str,
    body_text: str,
    attachments: Sequence[tuple[str, bytes, str]] = (),
    *,
    body_subtype: str = "plain",
) -> EmailMessage:
    """Build the report email: ``body_text`` as a text/``body_subtype`` part, then each attachment.

    ``sender`` and every entry of ``recipients`` is one address, optionally with a display name
    ("Ops <ops@example.com>"). ``attachments``: (filename, content bytes, MIME type such as
    "image/png"). Sets From, To, Subject, Date and a Message-ID. Pure: no I/O.
    Raises ConfigError naming the field (``sender``, ``recipients[i]``, ``subject``,
    ``attachments[i]``, ``body_subtype``) for an empty or malformed value, and for a CR or LF in
    any header value, which would let the value add headers of its own (header injection).
    """
    sender_address = _address("sender", sender)
    if isinstance(recipients, (str, bytes)):
        raise ConfigError("recipients: expected a list of addresses, got a single string")
    if not recipients:
        raise ConfigError("recipients: expected at least one address, got none")
    for index, recipient in enumerate(recipients):
        _address(f"recipients[{index}]", recipient)
    _header_text("subject", subject)
    if body_subtype not in BODY_SUBTYPES:
        raise ConfigError(f"body_subtype: expected one of {', '.join(BODY_SUBTYPES)}, got {body_subtype!r}")
    if not isinstance(body_text, str):
        raise ConfigError(f"body_text: expected text (str), got {type(body_text).__name__}")

    message = EmailMessage(policy=MESSAGE_POLICY)
    message["From"] = sender
    message["To"] = ", ".join(recipients)
    message["Subject"] = subject
    message["Date"] = formatdate(localtime=False, usegmt=True)
    # An explicit domain: without one, make_msgid asks DNS for this host's name, which can stall.
    message["Message-ID"] = make_msgid(domain=sender_address.rpartition("@")[2])
    message.set_content(body_text, subtype=body_subtype, charset="utf-8")
    for index, attachment in enumerate(attachments):
        filename, content, mime_type = _attachment(f"attachments[{index}]", attachment)
        maintype, _, subtype = mime_type.partition("/")
        message.add_attachment(content, maintype=maintype, subtype=subtype, filename=filename)
    return message


def _header_text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{name}: expected text (str), got {type(value).__name__}")
    if "\r" in value or "\n" in value:
        raise ConfigError(f"{name}: must not contain CR or LF (header injection), got {value[:80]!r}")
    return value


def _address(name: str, value: object) -> str:
    """The bare address in ``value`` ("Ops <ops@example.com>" -> "ops@example.com"), validated."""
    text = _header_text(name, value)
    if not text.strip():
        raise ConfigError(f"{name}: expected an email address, got an empty string")
    parsed = getaddresses([text])
    # A comma or a second <...> would smuggle extra recipients into one entry.
    if len(parsed) != 1:
        raise ConfigError(f"{name}: expected one email address, got {text[:80]!r}")
    address = parsed[0][1]
    local, at, domain = address.rpartition("@")
    if not at or not local or not domain or any(c.isspace() for c in address):
        raise ConfigError(f"{name}: expected an address like name@example.com, got {text[:80]!r}")
    return address


def _attachment(name: str, attachment: object) -> tuple[str, bytes, str]:
    if not isinstance(attachment, tuple) or len(attachment) != 3:
        raise ConfigError(f"{name}: expected (filename, bytes, mime type), got {type(attachment).__name__}")
    filename, content, mime_type = attachment
    _header_text(f"{name} filename", filename)
    if not filename.strip() or "/" in filename or "\\" in filename:
        raise ConfigError(f"{name} filename: expected a plain file name, got {filename!r}")
    if not isinstance(content, (bytes, bytearray)):
        raise ConfigError(f"{name} ({filename}): expected the content as bytes, got {type(content).__name__}")
    _header_text(f"{name} mime type", mime_type)
    maintype, slash, subtype = mime_type.partition("/")
    if not slash or not maintype or not subtype or any(c.isspace() or c == "/" for c in maintype + subtype):
        raise ConfigError(f"{name} ({filename}): expected a MIME type like image/png, got {mime_type!r}")
    return filename, bytes(content), mime_type


def _message_stats(message: EmailMessage) -> tuple[int, int]:
    """(number of recipients in To, Cc and Bcc, size in bytes as sent)."""
    fields = [value for header in ("To", "Cc", "Bcc") for value in message.get_all(header, [])]
    recipients = [address for _, address in getaddresses([str(value) for value in fields]) if address]
    return len(recipients), len(message.as_bytes(policy=MESSAGE_POLICY))


# --- SMTP -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SmtpSettings:
    """Where and how to submit mail over SMTP; ``timeout_s``: seconds per socket operation.

    ``username`` and ``password`` go together (both or neither); with them, ``starttls`` must be
    on, so the password never crosses the network unencrypted. The password is left out of
    ``repr``. Raises ConfigError for an empty host, a port outside 1..65535, a timeout <= 0, or
    inconsistent credentials.
    """

    host: str
    port: int = SMTP_SUBMISSION_PORT
    starttls: bool = True
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if not isinstance(self.host, str) or not self.host.strip():
            raise ConfigError(f"smtp host: expected a host name, got {self.host!r}")
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 < self.port < 65536:
            raise ConfigError(f"smtp port: expected an integer in 1..65535, got {self.port!r}")
        if not self.timeout_s > 0:
            raise ConfigError(f"smtp timeout_s: expected seconds > 0, got {self.timeout_s!r}")
        if (self.username is None) != (self.password is None):
            given, missing = ("username", "password") if self.password is None else ("password", "username")
            raise ConfigError(f"smtp {given} is set but {missing} is not: give both or neither")
        if self.username is not None and not self.starttls:
            raise ConfigError("smtp username is set with starttls off: the password would be sent unencrypted")


def smtp_password_from(
    env_var: str | None = None,
    file: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """The SMTP password from the environment variable named ``env_var`` or from ``file``.

    At most one source may be given; neither gives None (no login). A file's content is read as
    UTF-8 with one trailing newline (LF or CRLF) removed. ``environ`` defaults to ``os.environ``.
    Raises ConfigError naming the variable or the file (never the value) when both sources are
    given, the variable is unset or empty, or the file is missing, unreadable, not UTF-8 or empty.
    """
    if env_var is not None and file is not None:
        raise ConfigError("smtp password: give an environment variable or a file, not both")
    if env_var is not None:
        value = (os.environ if environ is None else environ).get(env_var)
        if value is None:
            raise ConfigError(f"smtp password: environment variable {env_var} is not set")
        if not value:
            raise ConfigError(f"smtp password: environment variable {env_var} is empty")
        return value
    if file is None:
        return None
    path = Path(file)
    try:
        value = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"smtp password file {path}: not found") from None
    except IsADirectoryError:
        raise ConfigError(f"smtp password file {path}: is a directory, expected a file") from None
    except UnicodeDecodeError:
        # The decoder's message quotes the offending byte, which is part of the secret.
        raise ConfigError(f"smtp password file {path}: not valid UTF-8") from None
    except OSError as error:
        raise ConfigError(f"smtp password file {path}: cannot read: {error.strerror or type(error).__name__}") from None
    value = value.removesuffix("\n").removesuffix("\r")
    if not value:
        raise ConfigError(f"smtp password file {path}: is empty")
    return value


class SmtpSender:
    """Sends messages through one SMTP server: connect, EHLO, STARTTLS, login, send, QUIT.

    ``ssl_context`` checks the server's certificate during STARTTLS; the default,
    ``ssl.create_default_context()``, trusts the system's CAs and checks the host name.
    """

    transport = "smtp"

    def __init__(self, settings: SmtpSettings, ssl_context: ssl.SSLContext | None = None) -> None:
        self.settings = settings
        self.ssl_context = ssl_context

    def send(self, message: EmailMessage) -> str:
        """Submit ``message`` to its To/Cc/Bcc recipients in one attempt; returns its Message-ID.

        Blocks up to ``timeout_s`` per socket operation. Raises DeliveryError naming host:port
        and the SMTP code and reply when the connection is refused or times out, the server
        lacks STARTTLS, the certificate is not trusted, login fails, or the server refuses the
        sender, any recipient (even when others accepted the message) or the message.
        """
        settings = self.settings
        where = f"SMTP {settings.host}:{settings.port}"
        recipients, size_bytes = _message_stats(message)
        try:
            smtp = smtplib.SMTP(settings.host, settings.port, timeout=settings.timeout_s)
        except (OSError, smtplib.SMTPException) as error:
            raise self._error(where, "connect", error) from None
        stage = "EHLO"
        try:
            try:
                smtp.ehlo()
                if settings.starttls:
                    stage = "STARTTLS"
                    smtp.starttls(context=self.ssl_context or ssl.create_default_context())
                    smtp.ehlo()
                if settings.username is not None:
                    stage = "login"
                    smtp.login(settings.username, settings.password or "")
                stage = "send"
                refused = smtp.send_message(message)
            except (OSError, smtplib.SMTPException) as error:
                # `from None`: smtplib's exceptions carry the server's raw replies, which are
                # scrubbed here but would be printed unscrubbed as the cause.
                raise self._error(where, stage, error) from None
        finally:
            _quit_quietly(smtp)
        if refused:
            raise DeliveryError(
                f"{where}: recipients refused: {_refusals(refused, settings.password)}; "
                f"the other recipients were sent the message",
                transport=self.transport,
            )
        message_id = str(message.get("Message-ID", ""))
        log.info(
            "report_sent",
            transport=self.transport,
            server=f"{settings.host}:{settings.port}",
            recipients=recipients,
            bytes_sent=size_bytes,
            message_id=message_id,
        )
        return message_id

    def _error(self, where: str, stage: str, error: BaseException) -> DeliveryError:
        password = self.settings.password
        if isinstance(error, smtplib.SMTPRecipientsRefused):
            answer = f"every recipient refused: {_refusals(error.recipients, password)}"
        elif isinstance(error, smtplib.SMTPAuthenticationError):
            reply = _reply(error.smtp_code, error.smtp_error, password)
            answer = f"login as {self.settings.username!r} refused: {reply}"
        elif isinstance(error, smtplib.SMTPSenderRefused):
            answer = f"sender {error.sender!r} refused: {_reply(error.smtp_code, error.smtp_error, password)}"
        elif isinstance(error, smtplib.SMTPResponseException):
            answer = _reply(error.smtp_code, error.smtp_error, password)
        elif isinstance(error, smtplib.SMTPNotSupportedError):
            answer = f"server does not support a required extension: {_scrub(str(error), password)}"
        elif isinstance(error, ssl.SSLCertVerificationError):
            answer = f"TLS certificate verify failed: {error.verify_message or error.reason}"
        elif isinstance(error, ssl.SSLError):
            answer = f"TLS failed: {error.reason or error}"
        elif isinstance(error, TimeoutError) or isinstance(error.__context__, TimeoutError):
            # smtplib turns a timeout while reading a reply into SMTPServerDisconnected.
            answer = f"timed out after {self.settings.timeout_s:g} s"
        elif isinstance(error, ConnectionRefusedError):
            answer = "connection refused"
        else:
            answer = _scrub(str(error) or type(error).__name__, password)
        return DeliveryError(f"{where}: {stage} failed: {answer}", transport=self.transport)


def _quit_quietly(smtp: smtplib.SMTP) -> None:
    # Once DATA is answered 250 the report is delivered; a failing QUIT must not turn that into an error.
    try:
        smtp.quit()
    except (OSError, smtplib.SMTPException):
        smtp.close()


def _reply(code: int, reply: bytes | str, password: str | None) -> str:
    text = reply.decode("utf-8", "replace") if isinstance(reply, bytes) else str(reply)
    return f"{code} {_scrub(' '.join(text.split()), password)}"


def _refusals(refused: Mapping[str, tuple[int, bytes]], password: str | None) -> str:
    return ", ".join(f"{address} ({_reply(code, reply, password)})" for address, (code, reply) in refused.items())


def _scrub(text: str, password: str | None) -> str:
    # A server that echoes what it was sent must not get the password into our errors.
    return text.replace(password, "***") if password else text


# --- SES ------------------------------------------------------------------------------------


def ses_client(
    region: str | None = None,
    endpoint_url: str | None = None,
    session: boto3.Session | None = None,
) -> BaseClient:
    """The SES client every SES call of the project goes through: ``aws_client`` (standard
    retries, failed attempts logged). Does not call AWS; ConfigError when no region is configured."""
    return aws_client("ses", "SES", region, endpoint_url, session)


class SesSender:
    """Sends messages through Amazon SES (SendRawEmail, so attachments travel as built).

    ``client`` is an SES client, normally from ``ses_client``. SES accepts only a sender whose
    address or domain is a verified identity in the client's region (and, while the account is
    in the SES sandbox, only verified recipients).
    """

    transport = "ses"

    def __init__(self, client: BaseClient) -> None:
        self.client = client

    def send(self, message: EmailMessage) -> str:
        """Send ``message`` to its To/Cc/Bcc recipients; returns SES's message id.

        Blocks until SES answers (botocore's retries included). Raises DeliveryError naming the
        operation and the AWS error code, e.g. MessageRejected for an unverified sender.
        """
        recipients, _ = _message_stats(message)
        raw = message.as_bytes(policy=MESSAGE_POLICY)
        try:
            response = self.client.send_raw_email(RawMessage={"Data": raw})
        except ClientError as error:
            details = error.response.get("Error", {})
            code = details.get("Code", "unknown")
            reason = " ".join(str(details.get("Message", "")).split())[:200]
            raise DeliveryError(f"SES SendRawEmail failed: {code}: {reason}", transport=self.transport) from error
        except BotoCoreError as error:
            raise DeliveryError(f"SES SendRawEmail failed: {error}", transport=self.transport) from error
        message_id = str(response["MessageId"])
        log.info(
            "report_sent",
            transport=self.transport,
            region=self.client.meta.region_name,
            recipients=recipients,
            bytes_sent=len(raw),
            message_id=message_id,
        )
        return message_id
