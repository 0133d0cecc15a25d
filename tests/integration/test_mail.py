"""The report mail adapter against real servers: aiosmtpd on 127.0.0.1 (plain, and STARTTLS with
AUTH using a certificate made at test time) and moto's SES over HTTP."""

from __future__ import annotations

import datetime
import email
import email.policy
import io
import ipaddress
import json
import socket
import ssl
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path

import boto3
import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from structlog.testing import capture_logs

from autoscaler.adapters.mail import (
    SesSender,
    SmtpSender,
    SmtpSettings,
    build_report_message,
    ses_client,
    smtp_password_from,
)
from autoscaler.core.errors import ConfigError, DeliveryError

from conftest import REGION

SENDER = "Autoscaler <reports@example.com>"
RECIPIENTS = ["ops@example.com", "Energy Team <energy@example.org>"]
BODY = "# Daily energy report\n\nSaved 12.5 % (41.3 kWh) against follow-the-workload; m_t ≤ M all day.\n"
USERNAME = "reporter"
PASSWORD = "s3cr3t-Pa55-for-tests"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def png() -> bytes:
    """A small real PNG, drawn by matplotlib (Agg canvas, no display needed)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(1.0, 0.75), dpi=40)
    figure.add_subplot().plot([0, 1, 2], [3, 1, 2])
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


@pytest.fixture
def report(png: bytes) -> EmailMessage:
    attachments = [("capacity.png", png, "image/png")]
    return build_report_message(SENDER, RECIPIENTS, "Energy report 2024-05-01", BODY, attachments)


# --- a real SMTP server --------------------------------------------------------------------


@dataclass
class Received:
    mail_from: str
    rcpt_tos: list[str]
    content: bytes
    tls: bool
    authenticated: bool


@dataclass
class RecordingHandler:
    """aiosmtpd handler: keeps every accepted message; refuses the recipients in ``refuse``."""

    refuse: set[str] = field(default_factory=set)
    received: list[Received] = field(default_factory=list)

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address in self.refuse:
            return "550 5.1.1 mailbox unavailable"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.received.append(
            Received(
                mail_from=envelope.mail_from,
                rcpt_tos=list(envelope.rcpt_tos),
                content=envelope.content,
                tls=session.ssl is not None,
                authenticated=bool(session.authenticated),
            )
        )
        return "250 Message accepted for delivery"


class LocalController(Controller):
    """aiosmtpd's Controller on a port the OS picks (port=0)."""

    def _trigger_server(self) -> None:
        # The base class connects to self.port to start the server; with port 0 that must be
        # the port actually bound.
        self.port = self.server.sockets[0].getsockname()[1]
        super()._trigger_server()


@dataclass
class SmtpServer:
    host: str
    port: int
    handler: RecordingHandler


def _serve(handler: RecordingHandler, **smtp_options) -> Iterator[SmtpServer]:
    # server_hostname: otherwise aiosmtpd asks DNS for this host's name.
    controller = LocalController(handler, hostname="127.0.0.1", port=0, server_hostname="localhost", **smtp_options)
    controller.start()
    try:
        yield SmtpServer("127.0.0.1", controller.port, handler)
    finally:
        controller.stop()


@pytest.fixture
def smtp_server() -> Iterator[SmtpServer]:
    """A plain SMTP server (no TLS, no AUTH) on 127.0.0.1."""
    yield from _serve(RecordingHandler())


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A throwaway self-signed certificate for 127.0.0.1 and localhost: (cert PEM, key PEM)."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError:
        pytest.skip("the cryptography package is not installed; cannot make a test certificate")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@pytest.fixture
def client_tls(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    """A client context that trusts only the test certificate (and still checks the host name)."""
    return ssl.create_default_context(cafile=str(certificate[0]))


def _authenticate(server, session, envelope, mechanism, auth_data) -> AuthResult:
    accepted = LoginPassword(USERNAME.encode(), PASSWORD.encode())
    return AuthResult(success=auth_data == accepted, handled=False)


@pytest.fixture
def tls_smtp_server(certificate: tuple[Path, Path]) -> Iterator[SmtpServer]:
    """An SMTP server that requires STARTTLS before anything else and offers AUTH only over TLS."""
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(str(certificate[0]), str(certificate[1]))
    yield from _serve(
        RecordingHandler(),
        tls_context=server_tls,
        require_starttls=True,
        authenticator=_authenticate,
        auth_require_tls=True,
    )


def _parse(raw: bytes | str) -> EmailMessage:
    if isinstance(raw, str):
        return email.message_from_string(raw, policy=email.policy.default)
    return email.message_from_bytes(raw, policy=email.policy.default)


def _check_report(parsed: EmailMessage, png: bytes) -> None:
    assert parsed["Subject"] == "Energy report 2024-05-01"
    assert parsed["From"].addresses[0].addr_spec == "reports@example.com"
    assert [a.addr_spec for a in parsed["To"].addresses] == ["ops@example.com", "energy@example.org"]
    assert parsed.get_body(("plain",)).get_content().replace("\r\n", "\n") == BODY
    attachments = list(parsed.iter_attachments())
    assert [(a.get_filename(), a.get_content_type()) for a in attachments] == [("capacity.png", "image/png")]
    assert attachments[0].get_content() == png
    assert png.startswith(PNG_SIGNATURE)


def test_smtp_delivers_body_and_png_to_every_recipient(
    smtp_server: SmtpServer, report: EmailMessage, png: bytes
) -> None:
    sender = SmtpSender(SmtpSettings(host=smtp_server.host, port=smtp_server.port, starttls=False, timeout_s=5))
    with capture_logs() as events:
        message_id = sender.send(report)

    [received] = smtp_server.handler.received
    assert received.mail_from == "reports@example.com"
    assert received.rcpt_tos == ["ops@example.com", "energy@example.org"]
    assert not received.tls
    parsed = _parse(received.content)
    _check_report(parsed, png)
    assert parsed["Message-ID"] == message_id == report["Message-ID"]
    [event] = [e for e in events if e["event"] == "report_sent"]
    assert event["transport"] == "smtp"
    assert event["recipients"] == 2
    assert event["message_id"] == message_id
    assert event["bytes_sent"] == len(report.as_bytes(policy=report.policy)) > len(png)


def test_smtp_starttls_and_login(
    tls_smtp_server: SmtpServer, client_tls: ssl.SSLContext, report: EmailMessage, png: bytes
) -> None:
    settings = SmtpSettings(
        tls_smtp_server.host, tls_smtp_server.port, username=USERNAME, password=PASSWORD, timeout_s=5
    )
    with capture_logs() as events:
        SmtpSender(settings, ssl_context=client_tls).send(report)

    [received] = tls_smtp_server.handler.received
    assert received.tls and received.authenticated
    _check_report(_parse(received.content), png)
    assert PASSWORD not in repr(settings)
    assert events and PASSWORD not in repr(events)


def test_smtp_wrong_password_names_server_and_code_never_the_password(
    tls_smtp_server: SmtpServer, client_tls: ssl.SSLContext, report: EmailMessage
) -> None:
    wrong = "not-" + PASSWORD
    settings = SmtpSettings(tls_smtp_server.host, tls_smtp_server.port, username=USERNAME, password=wrong, timeout_s=5)
    with capture_logs() as events, pytest.raises(DeliveryError) as caught:
        SmtpSender(settings, ssl_context=client_tls).send(report)

    text = str(caught.value)
    assert f"{tls_smtp_server.host}:{tls_smtp_server.port}" in text
    assert f"login failed: login as {USERNAME!r} refused: 535" in text
    assert caught.value.transport == "smtp"
    for secret in (wrong, PASSWORD):
        assert secret not in text and secret not in repr(caught.value) and secret not in repr(events)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert tls_smtp_server.handler.received == []


def test_smtp_untrusted_certificate_is_refused(tls_smtp_server: SmtpServer, report: EmailMessage) -> None:
    # The default context trusts the system's CAs only, not the self-signed test certificate.
    settings = SmtpSettings(tls_smtp_server.host, tls_smtp_server.port, timeout_s=5)
    with pytest.raises(DeliveryError, match="STARTTLS failed: TLS certificate verify failed: self.signed certificate"):
        SmtpSender(settings).send(report)
    assert tls_smtp_server.handler.received == []


def test_smtp_without_starttls_gets_the_servers_refusal(tls_smtp_server: SmtpServer, report: EmailMessage) -> None:
    settings = SmtpSettings(tls_smtp_server.host, tls_smtp_server.port, starttls=False, timeout_s=5)
    with pytest.raises(DeliveryError, match=r"send failed: .*530 .*STARTTLS"):
        SmtpSender(settings).send(report)


def test_smtp_starttls_required_by_us_but_not_offered(smtp_server: SmtpServer, report: EmailMessage) -> None:
    settings = SmtpSettings(smtp_server.host, smtp_server.port, starttls=True, timeout_s=5)
    with pytest.raises(DeliveryError, match="STARTTLS failed: server does not support .*STARTTLS"):
        SmtpSender(settings).send(report)
    assert smtp_server.handler.received == []


def test_smtp_every_recipient_refused(smtp_server: SmtpServer, report: EmailMessage) -> None:
    smtp_server.handler.refuse = {"ops@example.com", "energy@example.org"}
    expected = r"every recipient refused: ops@example.com \(550 5.1.1 mailbox unavailable\)"
    with pytest.raises(DeliveryError, match=expected):
        SmtpSender(SmtpSettings(smtp_server.host, smtp_server.port, starttls=False, timeout_s=5)).send(report)
    assert smtp_server.handler.received == []


def test_smtp_one_recipient_refused_is_an_error_after_the_others_got_it(
    smtp_server: SmtpServer, report: EmailMessage
) -> None:
    smtp_server.handler.refuse = {"energy@example.org"}
    expected = r"recipients refused: energy@example.org \(550 .*other recipients were sent"
    with pytest.raises(DeliveryError, match=expected):
        SmtpSender(SmtpSettings(smtp_server.host, smtp_server.port, starttls=False, timeout_s=5)).send(report)
    [received] = smtp_server.handler.received
    assert received.rcpt_tos == ["ops@example.com"]


def test_smtp_connection_refused(report: EmailMessage) -> None:
    # A bound socket that does not listen: connecting to it is refused, and no other process can take the port.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        with pytest.raises(DeliveryError, match=rf"SMTP 127.0.0.1:{port}: connect failed: connection refused"):
            SmtpSender(SmtpSettings("127.0.0.1", port, starttls=False, timeout_s=2)).send(report)


def test_smtp_silent_server_times_out(report: EmailMessage) -> None:
    # The kernel completes the TCP handshake from the backlog, but no greeting ever comes.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        with pytest.raises(DeliveryError, match=r"connect failed: timed out after 0.3 s"):
            SmtpSender(SmtpSettings("127.0.0.1", port, starttls=False, timeout_s=0.3)).send(report)


# --- SES through moto's server ---------------------------------------------------------------


def _moto_ses_raw_messages(endpoint: str) -> list[dict]:
    """What moto's SES captured. moto serves its models' state at GET /moto-api/data.json
    (there is no SES-specific endpoint); SendRawEmail calls appear under ses -> RawMessage."""
    with urllib.request.urlopen(f"{endpoint}/moto-api/data.json", timeout=10) as response:
        return json.load(response).get("ses", {}).get("RawMessage", [])


@pytest.fixture
def ses(moto_endpoint: str):
    return ses_client(region=REGION, endpoint_url=moto_endpoint, session=boto3.Session())


def test_ses_sends_the_raw_message_with_its_attachment(
    moto_endpoint: str, ses, report: EmailMessage, png: bytes
) -> None:
    ses.verify_email_identity(EmailAddress="reports@example.com")
    with capture_logs() as events:
        message_id = SesSender(ses).send(report)

    [captured] = _moto_ses_raw_messages(moto_endpoint)
    assert captured["id"] == message_id
    assert captured["source"] == "reports@example.com"
    _check_report(_parse(captured["raw_data"]), png)
    [event] = [e for e in events if e["event"] == "report_sent"]
    assert (event["transport"], event["region"], event["recipients"]) == ("ses", REGION, 2)
    assert event["message_id"] == message_id


def test_ses_unverified_sender_is_message_rejected(moto_endpoint: str, ses, report: EmailMessage) -> None:
    with pytest.raises(DeliveryError, match="SES SendRawEmail failed: MessageRejected") as caught:
        SesSender(ses).send(report)
    assert caught.value.transport == "ses"
    assert _moto_ses_raw_messages(moto_endpoint) == []


def test_ses_client_uses_standard_retries(ses) -> None:
    assert ses.meta.config.retries["mode"] == "standard"
    assert ses.meta.region_name == REGION


# --- building the message --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field_name"),
    [
        ({"subject": "Report\r\nBcc: victim@example.net"}, "subject"),
        ({"subject": "Report\nX-Injected: 1"}, "subject"),
        ({"recipients": ["ops@example.com", "x@example.com\nBcc: victim@example.net"]}, r"recipients\[1\]"),
        ({"sender": "reports@example.com\r\nBcc: victim@example.net"}, "sender"),
        ({"attachments": [("a.png\r\nX: 1", b"", "image/png")]}, r"attachments\[0\] filename"),
    ],
)
def test_header_injection_is_refused(kwargs: dict, field_name: str) -> None:
    arguments = {"sender": SENDER, "recipients": RECIPIENTS, "subject": "Report", "body_text": BODY, "attachments": []}
    with pytest.raises(ConfigError, match=rf"^{field_name}: must not contain CR or LF"):
        build_report_message(**{**arguments, **kwargs})


@pytest.mark.parametrize(
    ("recipients", "match"),
    [
        ([], r"recipients: expected at least one address"),
        ("ops@example.com", r"recipients: expected a list"),
        (["ops.example.com"], r"recipients\[0\]: expected an address like"),
        (["  "], r"recipients\[0\]: expected an email address"),
        (["ops@example.com, other@example.com"], r"recipients\[0\]: expected one email address"),
        (["ops@example.com", "@example.com"], r"recipients\[1\]: expected an address like"),
    ],
)
def test_bad_recipients_are_refused(recipients, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        build_report_message(SENDER, recipients, "Report", BODY, [])


def test_bad_attachment_is_refused(png: bytes) -> None:
    with pytest.raises(ConfigError, match=r"attachments\[0\] \(c.png\): expected a MIME type"):
        build_report_message(SENDER, RECIPIENTS, "Report", BODY, [("c.png", png, "png")])
    with pytest.raises(ConfigError, match=r"attachments\[0\] \(c.png\): expected the content as bytes"):
        build_report_message(SENDER, RECIPIENTS, "Report", BODY, [("c.png", "text", "image/png")])


def test_message_is_seven_bit_and_markdown_subtype_is_kept() -> None:
    message = build_report_message(SENDER, RECIPIENTS, "Rapport — énergie", BODY, [], body_subtype="markdown")
    raw = message.as_bytes()
    assert raw.isascii()  # no 8BITMIME needed from any server
    parsed = _parse(raw)
    assert parsed.get_content_type() == "text/markdown"
    assert parsed["Subject"] == "Rapport — énergie"
    assert parsed.get_content().replace("\r\n", "\n") == BODY


# --- settings and the password ---------------------------------------------------------------


def test_password_is_not_in_repr_and_settings_are_checked() -> None:
    settings = SmtpSettings("mail.example.com", username=USERNAME, password=PASSWORD)
    assert settings.port == 587 and settings.starttls
    assert PASSWORD not in repr(settings) and USERNAME in repr(settings)
    with pytest.raises(ConfigError, match="username is set but password is not"):
        SmtpSettings("mail.example.com", username=USERNAME)
    with pytest.raises(ConfigError, match="password would be sent unencrypted"):
        SmtpSettings("mail.example.com", starttls=False, username=USERNAME, password=PASSWORD)
    with pytest.raises(ConfigError, match="smtp port"):
        SmtpSettings("mail.example.com", port=0)


def test_password_from_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPORT_SMTP_PASSWORD", PASSWORD)
    assert smtp_password_from(env_var="REPORT_SMTP_PASSWORD") == PASSWORD
    monkeypatch.setenv("REPORT_SMTP_PASSWORD", "")
    with pytest.raises(ConfigError, match="REPORT_SMTP_PASSWORD is empty"):
        smtp_password_from(env_var="REPORT_SMTP_PASSWORD")
    monkeypatch.delenv("REPORT_SMTP_PASSWORD")
    with pytest.raises(ConfigError, match="environment variable REPORT_SMTP_PASSWORD is not set"):
        smtp_password_from(env_var="REPORT_SMTP_PASSWORD")
    assert smtp_password_from() is None


def test_password_from_file_strips_one_trailing_newline(tmp_path: Path) -> None:
    path = tmp_path / "smtp-password"
    path.write_bytes(PASSWORD.encode() + b"\n")
    assert smtp_password_from(file=path) == PASSWORD
    path.write_bytes(PASSWORD.encode() + b"\r\n")
    assert smtp_password_from(file=path) == PASSWORD
    path.write_bytes(PASSWORD.encode() + b" \n\n")
    assert smtp_password_from(file=path) == PASSWORD + " \n"
    with pytest.raises(ConfigError, match="not both"):
        smtp_password_from(env_var="REPORT_SMTP_PASSWORD", file=path)


def test_password_file_errors_name_the_file_never_the_content(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-password"
    with pytest.raises(ConfigError, match=rf"^smtp password file {missing}: not found$"):
        smtp_password_from(file=missing)
    with pytest.raises(ConfigError, match="is a directory"):
        smtp_password_from(file=tmp_path)
    latin1 = tmp_path / "latin1-password"
    latin1.write_bytes("pässwörd-ÿ".encode("latin-1"))
    with pytest.raises(ConfigError) as caught:
        smtp_password_from(file=latin1)
    assert str(caught.value) == f"smtp password file {latin1}: not valid UTF-8"
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


# --- `autoscaler report --email`, end to end ------------------------------------------------


def _report_config(tmp_path: Path, report_table: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text('[cluster]\nid = "j-ABC123"\nregion = "us-east-1"\n[report]\n' + report_table)
    return str(path)


def _check_energy_mail(parsed: EmailMessage) -> None:
    assert parsed["Subject"].startswith("Energy report: Workload A")
    body = parsed.get_body(("plain",)).get_content()
    assert "| Energy (kWh) |" in body and "gcp-u" in body and "no provisioning" in body
    [attachment] = list(parsed.iter_attachments())
    assert attachment.get_filename() == "energy.png" and attachment.get_content().startswith(PNG_SIGNATURE)


def test_report_command_emails_the_replay_report_by_smtp(smtp_server: SmtpServer, tmp_path: Path, capsys) -> None:
    from autoscaler.app.cli import main

    config = _report_config(
        tmp_path,
        f'email_to = ["ops@example.com"]\nemail_from = "reports@example.com"\nsmtp_host = "{smtp_server.host}"\n'
        f"smtp_port = {smtp_server.port}\nsmtp_starttls = false\n",
    )
    assert main(["report", "--replay", "--config", config, "--email"]) == 0
    [received] = smtp_server.handler.received
    assert received.rcpt_tos == ["ops@example.com"]
    _check_energy_mail(_parse(received.content))
    assert "emailed to ops@example.com" in capsys.readouterr().err


def test_report_command_emails_by_ses(moto_endpoint: str, ses, tmp_path: Path) -> None:
    from autoscaler.app.cli import main

    ses.verify_email_identity(EmailAddress="reports@example.com")
    config = _report_config(
        tmp_path,
        f'email_to = ["ops@example.com"]\nemail_from = "reports@example.com"\ntransport = "ses"\n'
        f'ses_endpoint_url = "{moto_endpoint}"\n',
    )
    assert main(["report", "--replay", "--config", config, "--email"]) == 0
    [captured] = _moto_ses_raw_messages(moto_endpoint)
    _check_energy_mail(_parse(captured["raw_data"]))


def test_report_command_smtp_password_never_leaves_the_environment(
    smtp_server: SmtpServer, tmp_path: Path, capsys, monkeypatch
) -> None:
    from autoscaler.app.cli import main

    monkeypatch.setenv("AUTOSCALER_SMTP_PASSWORD", "hunter2-secret")
    config = _report_config(
        tmp_path,
        f'email_to = ["ops@example.com"]\nemail_from = "reports@example.com"\nsmtp_host = "{smtp_server.host}"\n'
        f'smtp_port = {smtp_server.port}\nsmtp_username = "reporter"\n',
    )
    # The plain server offers no STARTTLS: refused before any password is sent, and never printed.
    assert main(["report", "--replay", "--config", config, "--email"]) == 2
    captured = capsys.readouterr()
    assert "STARTTLS" in captured.err and "hunter2-secret" not in captured.err + captured.out
    assert smtp_server.handler.received == []
