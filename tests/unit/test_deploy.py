"""Deployment files: the Dockerfile and .dockerignore, the systemd unit, the EMR bootstrap action,
and the IAM policy against every AWS operation the shipped code calls (found by static analysis)."""

from __future__ import annotations

import ast
import configparser
import http.server
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
UNIT = ROOT / "deploy" / "autoscaler.service"
BOOTSTRAP = ROOT / "deploy" / "bootstrap-action.sh"
IAM_POLICY = ROOT / "deploy" / "iam-policy.json"

DATA_DIR = "/var/lib/autoscaler"
CONFIG_FILE = "/etc/autoscaler/config.toml"
DAEMON_ARGS = ["run", "--config", CONFIG_FILE]
HEALTH_PORT = 9464


@lru_cache(maxsize=None)
def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def shipped_packages() -> list[str]:
    """The top-level packages the distribution ships (pyproject's [tool.setuptools] packages)."""
    return sorted({name.split(".")[0] for name in pyproject()["tool"]["setuptools"]["packages"]})


# --- Dockerfile -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str
    """Upper case, e.g. "RUN"."""
    arguments: str
    """Everything after the keyword, continuation lines joined with single spaces."""
    line: int
    """Line number of the instruction's first line."""


def dockerfile_instructions(text: str) -> list[Instruction]:
    """The instructions of a Dockerfile, in order.

    A line ending in a backslash continues on the next line; comment lines (also the ones inside a
    continuation, which Docker drops) and blank lines are skipped; parser directives are comments.
    """
    instructions: list[Instruction] = []
    start: int | None = None
    parts: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if start is None:
            start = number
        if stripped.endswith("\\"):
            parts.append(stripped[:-1].strip())
            continue
        parts.append(stripped)
        keyword, _, arguments = " ".join(part for part in parts if part).partition(" ")
        instructions.append(Instruction(keyword.upper(), arguments.strip(), start))
        start, parts = None, []
    assert start is None, f"Dockerfile ends inside a line continuation started on line {start}"
    return instructions


@lru_cache(maxsize=None)
def dockerfile() -> tuple[Instruction, ...]:
    return tuple(dockerfile_instructions(DOCKERFILE.read_text(encoding="utf-8")))


def stages(instructions: tuple[Instruction, ...]) -> list[list[Instruction]]:
    """The build stages, each starting with its FROM."""
    result: list[list[Instruction]] = []
    for instruction in instructions:
        if instruction.keyword == "FROM":
            result.append([])
        assert result, f"line {instruction.line}: {instruction.keyword} before the first FROM"
        result[-1].append(instruction)
    return result


def from_image_and_stage(instruction: Instruction) -> tuple[str, str | None]:
    """FROM [--platform=...] IMAGE [AS NAME] -> (IMAGE, NAME or None)."""
    words = [word for word in instruction.arguments.split() if not word.startswith("--")]
    image = words[0]
    name = words[2] if len(words) == 3 and words[1].lower() == "as" else None
    return image, name


def exec_form(instruction: Instruction) -> list[str]:
    """The JSON array of an exec-form instruction (ENTRYPOINT, CMD); fails for the shell form."""
    try:
        value = json.loads(instruction.arguments)
    except json.JSONDecodeError:
        pytest.fail(f"line {instruction.line}: {instruction.keyword} must use the exec form (a JSON array): {instruction.arguments}")
    assert isinstance(value, list) and all(isinstance(item, str) for item in value), instruction
    return value


def env_assignments(instruction: Instruction) -> dict[str, str]:
    """ENV/ARG KEY=VALUE ... (or the legacy ENV KEY VALUE) as a dict; an ARG without a default maps to ""."""
    words = shlex.split(instruction.arguments)
    if instruction.keyword == "ENV" and words and "=" not in words[0]:
        return {words[0]: " ".join(words[1:])}
    return dict(word.partition("=")[::2] for word in words)


def healthcheck() -> tuple[dict[str, str], list[str]]:
    """The HEALTHCHECK's options ({"interval": "60s", ...}) and its exec-form command."""
    found = [instruction for instruction in dockerfile() if instruction.keyword == "HEALTHCHECK"]
    assert len(found) == 1, "expected exactly one HEALTHCHECK"
    match = re.fullmatch(r"((?:--[\w-]+=\S+\s+)*)CMD\s+(.*)", found[0].arguments)
    assert match, f"HEALTHCHECK must be [OPTIONS] CMD [...], got {found[0].arguments!r}"
    options = dict(option[2:].split("=", 1) for option in match.group(1).split())
    command = exec_form(Instruction("CMD", match.group(2), found[0].line))
    return options, command


def duration_s(text: str) -> float:
    """A Go duration as Docker takes it ("90s", "1m30s", "2h") in seconds."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text)
    assert parts and "".join(number + unit for number, unit in parts) == text, f"not a duration: {text!r}"
    return sum(float(number) * units[unit] for number, unit in parts)


def test_dockerfile_parser_joins_continuations_and_skips_comments() -> None:
    text = "# syntax=docker/dockerfile:1\nFROM python:3.11-slim AS build\nRUN a \\\n    # dropped\n    && b\n\nuser app\n"
    assert dockerfile_instructions(text) == [
        Instruction("FROM", "python:3.11-slim AS build", 2),
        Instruction("RUN", "a && b", 3),
        Instruction("USER", "app", 7),
    ]


def test_dockerfile_builds_on_one_pinned_official_slim_python_that_meets_requires_python() -> None:
    stage_names: set[str] = set()
    images = []
    for stage in stages(dockerfile()):
        image, name = from_image_and_stage(stage[0])
        if image not in stage_names:
            images.append(image)
        if name:
            stage_names.add(name)
    assert images
    for image in images:
        assert re.fullmatch(r"(docker\.io/)?(library/)?python:3\.\d+-slim(-[a-z]+)?(@sha256:[0-9a-f]{64})?", image), (
            f"base image {image!r}: expected the official python image, slim, with a pinned minor version "
            "(e.g. python:3.11-slim-bookworm)"
        )
    # The virtual environment built in one stage is copied into the next: it only runs on the same Python.
    assert len(set(images)) == 1, f"stages use different base images: {images}"
    version = re.search(r"python:(3\.\d+)", images[0]).group(1)
    requires = pyproject()["project"]["requires-python"]
    assert SpecifierSet(requires).contains(version), f"base image Python {version} does not meet requires-python {requires}"


def test_dockerfile_installs_runtime_dependencies_only() -> None:
    installs = [i for i in dockerfile() if i.keyword == "RUN" and re.search(r"\bpip3?\b.*\binstall\b", i.arguments)]
    assert installs, "no pip install in the Dockerfile"
    for install in installs:
        assert "[" not in install.arguments, f"line {install.line}: installs extras: {install.arguments}"
        assert "--no-cache-dir" in install.arguments, f"line {install.line}: pip install without --no-cache-dir"
    copied = " ".join(i.arguments for i in dockerfile() if i.keyword in {"COPY", "ADD"})
    assert not re.search(r"(^|\s)(\./)?(tests|benchmarks)(/|\s|$)", copied), "tests or benchmarks are copied into the image"


def test_dockerfile_runs_as_a_non_root_user_after_every_install() -> None:
    instructions = list(dockerfile())
    final = stages(dockerfile())[-1]
    users = [i for i in final if i.keyword == "USER"]
    assert users, "the final stage sets no USER: the daemon would run as root"
    user = users[-1]
    name = user.arguments.split(":")[0]
    assert name not in {"root", "0"}, f"line {user.line}: USER {user.arguments} is root"
    position = instructions.index(user)
    last_install = max(
        (n for n, i in enumerate(instructions) if i.keyword == "RUN" and re.search(r"\bpip3?\b.*\binstall\b", i.arguments)),
        default=-1,
    )
    assert position > last_install, "USER comes before the last pip install"
    assert all(i.keyword != "RUN" for i in instructions[position:]), "a RUN after USER: installs belong before the switch to the non-root user"
    for keyword in ("ENTRYPOINT", "CMD"):
        indices = [n for n, i in enumerate(instructions) if i.keyword == keyword]
        assert indices and min(indices) > position, f"{keyword} missing or before USER"
    if name.isdigit():
        # A numeric USER must be the account made for it, which owns the data directory.
        made = " ".join(i.arguments for i in final if i.keyword == "RUN")
        assert re.search(rf"useradd\b[^&;]*--uid {name}\b", made), f"no useradd --uid {name} in the final stage"


def test_dockerfile_data_directory_is_the_workdir_and_belongs_to_the_user() -> None:
    final = stages(dockerfile())[-1]
    workdirs = [i.arguments for i in final if i.keyword == "WORKDIR"]
    # The default store_path "autoscaler.db" is relative: it lands in the working directory.
    assert workdirs and workdirs[-1] == DATA_DIR
    made = " ".join(i.arguments for i in final if i.keyword == "RUN")
    user = [i.arguments for i in final if i.keyword == "USER"][-1].split(":")[0]
    owners = {user, "autoscaler"}
    owned = re.search(rf"install -d[^&;]*-o (\S+)[^&;]*{DATA_DIR}\b", made) or re.search(rf"chown[^&;]* (\S+?)(:\S+)? {DATA_DIR}\b", made)
    assert owned and owned.group(1) in owners, f"{DATA_DIR} is not made over to the USER ({user})"


def test_dockerfile_entrypoint_and_cmd_start_the_daemon_with_the_mounted_config() -> None:
    from autoscaler.app.cli import build_parser

    final = stages(dockerfile())[-1]
    entrypoint = exec_form([i for i in final if i.keyword == "ENTRYPOINT"][-1])
    command = exec_form([i for i in final if i.keyword == "CMD"][-1])
    assert entrypoint == ["autoscaler"]
    assert "autoscaler" in pyproject()["project"]["scripts"]
    assert command == DAEMON_ARGS
    args = build_parser().parse_args(command)
    assert (args.command, args.config, args.dry_run, args.replay) == ("run", Path(CONFIG_FILE), False, None)


def test_dockerfile_sets_python_runtime_environment() -> None:
    environment: dict[str, str] = {}
    for instruction in stages(dockerfile())[-1]:
        if instruction.keyword == "ENV":
            environment.update(env_assignments(instruction))
    assert environment.get("PYTHONDONTWRITEBYTECODE") == "1"
    assert environment.get("PYTHONUNBUFFERED") == "1"


def test_dockerfile_holds_no_credentials() -> None:
    secret_name = re.compile(r"SECRET|PASSWORD|PASSWD|TOKEN|ACCESS_KEY|SESSION_KEY|CREDENTIAL|PRIVATE", re.IGNORECASE)
    for instruction in dockerfile():
        if instruction.keyword in {"ENV", "ARG"}:
            for key, value in env_assignments(instruction).items():
                assert not (secret_name.search(key) and value), f"line {instruction.line}: {key} is given a value in the image"
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert not re.search(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b", text), "an AWS access key id in the Dockerfile"
    copied = " ".join(i.arguments for i in dockerfile() if i.keyword in {"COPY", "ADD"})
    assert not re.search(r"\.aws\b|\.pem\b|\.env\b|\bid_rsa\b", copied)


def test_dockerfile_healthcheck_asks_healthz_with_python() -> None:
    options, command = healthcheck()
    assert {"interval", "timeout", "start-period", "retries"} <= options.keys()
    assert int(options["retries"]) >= 1
    assert duration_s(options["start-period"]) >= 30, "start-up (imports, the first slot) needs a grace period"
    assert command[0] == "python" and command[1] == "-c", "slim images have no curl or wget: ask with Python"
    script = command[2]
    assert "/healthz" in script and "127.0.0.1" in script and f"'{HEALTH_PORT}'" in script
    urlopen_timeout = re.search(r"timeout=(\d+(?:\.\d+)?)", script)
    assert urlopen_timeout, "urlopen without a timeout could hang until Docker's own timeout"
    assert float(urlopen_timeout.group(1)) < duration_s(options["timeout"])


def test_dockerfile_health_grace_covers_the_start_up_wait_for_emr() -> None:
    from autoscaler.app.compose import STARTUP_WAIT_S

    options, _ = healthcheck()
    # Start-up may try EMR for STARTUP_WAIT_S before the first slot; a daemon that then starts is
    # healthy, so failed probes during that wait must not count: 60 s more for imports and a slot.
    assert duration_s(options["start-period"]) >= STARTUP_WAIT_S + 60


class _HealthHandler(http.server.BaseHTTPRequestHandler):
    status = 200
    paths: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        type(self).paths.append(self.path)
        self.send_response(type(self).status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_healthcheck_command_passes_on_200_and_fails_on_503_or_no_server() -> None:
    _, command = healthcheck()
    # AUTOSCALER_HEALTH_PORT points the check at a stand-in /healthz on a free port.
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HealthHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    environment = {**os.environ, "AUTOSCALER_HEALTH_PORT": str(port)}
    argv = [sys.executable, *command[1:]]
    try:
        _HealthHandler.status = 200
        assert subprocess.run(argv, env=environment, capture_output=True, timeout=30).returncode == 0
        _HealthHandler.status = 503
        assert subprocess.run(argv, env=environment, capture_output=True, timeout=30).returncode == 1
        assert _HealthHandler.paths == ["/healthz", "/healthz"]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert subprocess.run(argv, env=environment, capture_output=True, timeout=30).returncode == 1


def test_healthcheck_port_is_the_config_default_and_follows_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from autoscaler.app.config import Settings, load_settings

    # The HEALTHCHECK asks this port: a Settings without the field is a broken image, not a skip.
    assert "health_port" in Settings.model_fields, "Settings has no health_port field, which the HEALTHCHECK relies on"
    assert Settings.model_fields["health_port"].default == HEALTH_PORT
    for name in list(os.environ):
        if name.upper().startswith("AUTOSCALER_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AUTOSCALER_CLUSTER__ID", "j-2AXXXXXXGAPLF")
    monkeypatch.setenv("AUTOSCALER_HEALTH_PORT", "9999")
    assert load_settings(None).health_port == 9999


# --- .dockerignore --------------------------------------------------------------------------


def dockerignore_patterns(text: str) -> list[tuple[bool, re.Pattern[str]]]:
    """(negated, regex) per pattern line, with Docker's matching: patterns are relative to the
    context root, ``*`` and ``?`` stop at ``/``, ``**`` spans any number of directories."""
    patterns = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
        regex, index = "", 0
        while index < len(pattern):
            if pattern.startswith("**/", index):
                regex, index = regex + "(.*/)?", index + 3
            elif pattern.startswith("**", index):
                regex, index = regex + ".*", index + 2
            elif pattern[index] == "*":
                regex, index = regex + "[^/]*", index + 1
            elif pattern[index] == "?":
                regex, index = regex + "[^/]", index + 1
            elif pattern[index] == "[":
                end = pattern.index("]", index)
                regex, index = regex + pattern[index : end + 1], end + 1
            else:
                regex, index = regex + re.escape(pattern[index]), index + 1
        patterns.append((negated, re.compile(regex)))
    return patterns


def dockerignored(path: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Whether Docker leaves ``path`` out of the context: the last pattern matching it, or one of
    its parent directories, decides."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    excluded = False
    for negated, regex in patterns:
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            excluded = not negated
    return excluded


def test_dockerignore_matcher_follows_docker_rules() -> None:
    patterns = dockerignore_patterns("out\n**/*.db\n*.md\n!README.md\n")
    assert dockerignored("out/fig.png", patterns)
    assert dockerignored("a/b/c.db", patterns)
    assert dockerignored("NOTES.md", patterns) and not dockerignored("README.md", patterns)
    assert not dockerignored("docs/x.md", patterns)  # "*" does not cross "/"
    assert not dockerignored("output/x", patterns)


def test_dockerignore_leaves_out_local_state_and_keeps_what_the_build_copies() -> None:
    patterns = dockerignore_patterns(DOCKERIGNORE.read_text(encoding="utf-8"))
    for path in [
        ".git/HEAD",
        ".venv/bin/python",
        ".env",
        ".pytest_cache/v/cache/nodeids",
        ".hypothesis/examples/x",
        "autoscaler/__pycache__/cli.cpython-311.pyc",
        "deferral_autoscaler.egg-info/PKG-INFO",
        "out/energy.png",
        "autoscaler.db",
        "autoscaler.db-wal",
        "autoscaler.db.lock",
        "var/jobs.db",
        "tests/unit/test_deploy.py",
    ]:
        assert dockerignored(path, patterns), f"{path} would be sent to the Docker build"
    copied = [
        word
        for stage in stages(dockerfile())
        for i in stage
        if i.keyword in {"COPY", "ADD"} and "--from" not in i.arguments
        for word in (exec_form(i) if i.arguments.startswith("[") else i.arguments.split())[:-1]
        if not word.startswith("--")
    ]
    assert {"pyproject.toml", "README.md", *shipped_packages()} <= {word.rstrip("/") for word in copied}, (
        "the build stage must copy pyproject.toml, README.md (the package's readme) and every shipped package"
    )
    for source in copied:
        path = ROOT / source
        assert path.exists(), f"COPY {source}: no such file in the repository"
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        for file in files:
            relative = file.relative_to(ROOT).as_posix()
            assert not dockerignored(relative, patterns), f"{relative} is copied but .dockerignore leaves it out"


# --- systemd unit ---------------------------------------------------------------------------


@lru_cache(maxsize=None)
def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",), empty_lines_in_values=False)
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read_string(UNIT.read_text(encoding="utf-8"))
    return parser


def timespan_s(text: str) -> float:
    """A systemd time span ("600", "10min", "5min 30s") in seconds."""
    units = {"": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600}
    parts = re.findall(r"(\d+)\s*([a-z]*)", text)
    assert parts, f"not a time span: {text!r}"
    return sum(int(number) * units[unit] for number, unit in parts)


def test_unit_runs_the_daemon_as_its_own_user_in_the_data_directory() -> None:
    from autoscaler.app.cli import build_parser

    service = unit()["Service"]
    assert service["User"] == "autoscaler"
    assert service["WorkingDirectory"] == DATA_DIR
    assert service["EnvironmentFile"].lstrip("-") == "/etc/autoscaler/env"
    executable, *arguments = shlex.split(service["ExecStart"])
    assert executable == "/opt/autoscaler/.venv/bin/autoscaler"
    assert arguments == DAEMON_ARGS
    args = build_parser().parse_args(arguments)
    assert (args.command, args.config, args.dry_run) == ("run", Path(CONFIG_FILE), False)
    assert unit()["Install"]["WantedBy"] == "multi-user.target"


def test_unit_restarts_on_failure_and_lets_a_slot_finish_on_stop() -> None:
    service = unit()["Service"]
    assert service["Restart"] == "on-failure"
    assert service["KillSignal"] == "SIGTERM"
    # SIGTERM finishes the slot in progress (AWS calls with botocore's retries); a few minutes at least.
    assert timespan_s(service["TimeoutStopSec"]) >= 300


def test_unit_restarts_after_an_outage_but_not_after_a_bad_config() -> None:
    from autoscaler.core.errors import ClusterError, ConfigError, OutageError

    service = unit()["Service"]
    prevented = service["RestartPreventExitStatus"].split()
    # What cli.main exits with for a bad config or a wrong cluster (2), and for an outage (75).
    assert (ConfigError.exit_status, ClusterError.exit_status, OutageError.exit_status) == (2, 2, 75)
    assert prevented == [str(ConfigError.exit_status)]
    assert str(OutageError.exit_status) not in prevented
    # Restarts 30 s or so apart: AWS gets a rest, and 5 starts in 10 s (the start limit) never happen.
    assert 10 <= timespan_s(service["RestartSec"]) <= 120
    text = UNIT.read_text(encoding="utf-8")
    assert re.search(r"^#\s+2\s.*config", text, re.MULTILINE) and re.search(r"^#\s+75\s.*EX_TEMPFAIL", text, re.MULTILINE), (
        "the unit's comments say what 2 and 75 mean"
    )


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    # verify also checks that ExecStart's program exists; the venv is not installed here, so a copy
    # of the unit runs /bin/true instead and everything else is verified as shipped.
    text = UNIT.read_text(encoding="utf-8")
    executable = shlex.split(unit()["Service"]["ExecStart"])[0]
    copy = tmp_path / "autoscaler.service"
    copy.write_text(text.replace(f"ExecStart={executable}", "ExecStart=/bin/true"), encoding="utf-8")
    result = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=60)
    complaints = [line for line in (result.stdout + result.stderr).splitlines() if "autoscaler.service" in line]
    assert result.returncode == 0 and complaints == [], result.stdout + result.stderr


def test_unit_is_hardened_and_can_write_only_its_data_directory() -> None:
    service = unit()["Service"]
    truthy = {"yes", "true", "on", "1"}
    for key in ("NoNewPrivileges", "PrivateTmp", "PrivateDevices", "ProtectKernelTunables", "ProtectKernelModules", "ProtectControlGroups", "RestrictSUIDSGID"):
        assert service.get(key, "").lower() in truthy, f"{key} is not set"
    assert service["ProtectSystem"] == "strict"
    assert service["ProtectHome"].lower() in truthy | {"read-only", "tmpfs"}
    assert service["ReadWritePaths"].split() == [DATA_DIR]
    assert service["CapabilityBoundingSet"] == ""


# --- EMR bootstrap action -------------------------------------------------------------------


def bootstrap_text() -> str:
    return BOOTSTRAP.read_text(encoding="utf-8")


def test_bootstrap_action_is_valid_bash_with_strict_mode() -> None:
    result = subprocess.run(["bash", "-n", str(BOOTSTRAP)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^set -euo pipefail$", bootstrap_text(), re.MULTILINE)
    assert bootstrap_text().startswith("#!/usr/bin/env bash\n") or bootstrap_text().startswith("#!/bin/bash\n")


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_bootstrap_action_passes_shellcheck() -> None:
    result = subprocess.run(["shellcheck", str(BOOTSTRAP)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout


def test_bootstrap_action_checks_is_master_before_it_acts() -> None:
    main = re.search(r"^main\(\) \{\n(.*?)^\}$", bootstrap_text(), re.MULTILINE | re.DOTALL)
    assert main, "no main() in the bootstrap action"
    lines = main.group(1).splitlines()
    check = next(n for n, line in enumerate(lines) if "isMaster" in line and "json_field" in line)
    acting = re.compile(r"\b(aws|sudo|useradd|install|pip|systemctl|dnf|imds|curl|mktemp)\b|-m venv")
    first_action = next(n for n, line in enumerate(lines) if acting.search(line) and not line.lstrip().startswith("#"))
    assert check < first_action, f"main() acts ({lines[first_action].strip()!r}) before it checks isMaster"


def test_bootstrap_action_installs_the_unit_in_this_repository_by_default() -> None:
    embedded = re.search(r"<<'UNIT'\n(.*?)^UNIT$", bootstrap_text(), re.MULTILINE | re.DOTALL)
    assert embedded, "no embedded unit (cat <<'UNIT' ... UNIT) in the bootstrap action"
    assert embedded.group(1) == UNIT.read_text(encoding="utf-8"), "the bootstrap action's unit differs from deploy/autoscaler.service"


def test_bootstrap_action_sets_the_cluster_id_from_job_flow_json() -> None:
    text = bootstrap_text()
    assert re.search(r"json_field \"\$INFO_DIR/job-flow\.json\" jobFlowId", text)
    assert "AUTOSCALER_CLUSTER__ID=$cluster_id" in text
    assert "/etc/autoscaler" in text and "/opt/autoscaler/.venv" in text


STUBBED_COMMANDS = ["aws", "sudo", "useradd", "systemctl", "dnf", "curl", "install", "pip", "pip3", "python3.12", "python3.11", "python3.10"]


def run_bootstrap(tmp_path: Path, instance: str | None, *arguments: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run the bootstrap action against a made-up EMR info directory, every command that would act
    replaced by a stub that only records its call; returns the result and the recorded calls."""
    info = tmp_path / "info"
    info.mkdir()
    if instance is not None:
        (info / "instance.json").write_text(instance, encoding="utf-8")
    (info / "job-flow.json").write_text('{"jobFlowId": "j-2AXXXXXXGAPLF"}', encoding="utf-8")
    stubs = tmp_path / "bin"
    stubs.mkdir()
    calls = tmp_path / "calls"
    calls.touch()
    for name in STUBBED_COMMANDS:
        stub = stubs / name
        stub.write_text(f'#!/bin/sh\necho "{name} $*" >> "{calls}"\n', encoding="utf-8")
        stub.chmod(0o755)
    environment = {**os.environ, "EMR_INFO_DIR": str(info), "PATH": f"{stubs}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(["bash", str(BOOTSTRAP), *arguments], env=environment, capture_output=True, text=True, timeout=30)
    return result, calls.read_text(encoding="utf-8").splitlines()


URIS = ("s3://bucket/autoscaler/deferral_autoscaler-0.1.0-py3-none-any.whl", "s3://bucket/autoscaler/config.toml")


@pytest.mark.skipif(shutil.which("python3") is None, reason="the bootstrap action reads EMR's JSON with python3")
def test_bootstrap_action_does_nothing_on_a_core_or_task_node(tmp_path: Path) -> None:
    result, calls = run_bootstrap(tmp_path, '{"isMaster": false, "isRunningNameNode": false}', *URIS)
    assert result.returncode == 0, result.stderr
    assert "not the master node" in result.stdout
    assert calls == []


@pytest.mark.skipif(shutil.which("python3") is None, reason="the bootstrap action reads EMR's JSON with python3")
@pytest.mark.parametrize(
    "instance",
    [None, "not json", '{"isRunningNameNode": true}', '{"isMaster": "yes"}'],
    ids=["missing", "not-json", "no-isMaster", "isMaster-not-boolean"],
)
def test_bootstrap_action_stops_when_it_cannot_tell_the_master(tmp_path: Path, instance: str | None) -> None:
    result, calls = run_bootstrap(tmp_path, instance, *URIS)
    assert result.returncode != 0
    assert "bootstrap-action:" in result.stderr
    assert calls == []


@pytest.mark.parametrize(
    "arguments",
    [(), (URIS[0],), ("s3://bucket/autoscaler/package.zip", URIS[1]), (URIS[0], "/local/config.toml"), (*URIS, "https://x/u", "extra")],
    ids=["none", "one", "not-a-package", "config-not-s3", "too-many"],
)
def test_bootstrap_action_refuses_bad_arguments_on_every_node(tmp_path: Path, arguments: tuple[str, ...]) -> None:
    result, calls = run_bootstrap(tmp_path, '{"isMaster": false}', *arguments)
    assert result.returncode != 0
    assert "bootstrap-action:" in result.stderr
    assert calls == []


# --- IAM policy against the code's AWS calls ------------------------------------------------

IAM_PREFIXES = {"emr": "elasticmapreduce", "cloudwatch": "cloudwatch", "ses": "ses"}
"""boto3 service name -> IAM action prefix, for every service the code makes a client for."""

CLIENT_FACTORIES = {"emr_client": "emr", "cloudwatch_client": "cloudwatch", "ses_client": "ses"}
"""The project's client factories and the service of the client each returns."""

GENERIC_FACTORIES = {"aws_client", "client"}
"""Factories taking the service name as first argument: ``aws_client("emr", ...)``,
``session.client("emr")``, ``boto3.client("emr")``."""

NON_OPERATION_METHODS = {"can_paginate", "close", "generate_presigned_url"}
"""boto3 client methods that call no AWS operation."""


@dataclass(frozen=True)
class ClientCall:
    method: str
    """The client method called (snake case, e.g. "list_steps"); for a paginator the operation's
    method, for a waiter the waiter's name."""
    service: str | None
    """The boto3 service, when the client's factory is known from the code; else None."""
    kind: str
    """"call", "paginator" or "waiter"."""
    where: str


def _factory_service(node: ast.AST) -> str | None:
    """The service of the client ``node`` makes, when it is a call of a known client factory."""
    if not isinstance(node, ast.Call):
        return None
    name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr if isinstance(node.func, ast.Attribute) else None
    if name in CLIENT_FACTORIES:
        return CLIENT_FACTORIES[name]
    if name in GENERIC_FACTORIES and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        return node.args[0].value
    return None


def client_calls(source: str, filename: str) -> tuple[list[ClientCall], list[str]]:
    """Every boto3 client call in ``source``, and the problems: calls whose operation cannot be read.

    A client is a name or attribute called ``client`` or ``*_client`` (``self.client``,
    ``client``), a variable assigned from a client factory (``cw = cloudwatch_client(...)``,
    ``s = session.client("ses")``), or a factory call itself (``emr_client().list_steps()``).
    ``get_paginator("list_steps")`` and ``get_waiter("step_complete")`` count as the operation they
    run; their argument must be a string literal.
    """
    tree = ast.parse(source, filename)
    variables: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and (service := _factory_service(node.value)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            variables.update({target.id: service for target in targets if isinstance(target, ast.Name)})

    def client_service(node: ast.AST) -> tuple[bool, str | None]:
        if isinstance(node, ast.Name):
            if node.id in variables:
                return True, variables[node.id]
            return node.id == "client" or node.id.endswith("_client"), None
        if isinstance(node, ast.Attribute):
            return node.attr == "client" or node.attr.endswith("_client"), None
        service = _factory_service(node)
        return service is not None, service

    calls: list[ClientCall] = []
    problems: list[str] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        is_client, service = client_service(node.func.value)
        method = node.func.attr
        if not is_client or method in NON_OPERATION_METHODS:
            continue
        where = f"{filename}:{node.lineno}"
        if method in {"get_paginator", "get_waiter"}:
            argument = node.args[0] if node.args else None
            if not (isinstance(argument, ast.Constant) and isinstance(argument.value, str)):
                problems.append(f"{where}: {method} with a name that is not a string literal")
                continue
            calls.append(ClientCall(argument.value, service, "paginator" if method == "get_paginator" else "waiter", where))
        else:
            calls.append(ClientCall(method, service, "call", where))
    return calls, problems


@lru_cache(maxsize=None)
def service_models() -> dict[str, tuple[dict[str, str], dict[str, str]]]:
    """Per service, botocore's own {method: operation} and {waiter name: operation}. Offline: making
    a client reads the bundled models and calls nothing."""
    import boto3

    session = boto3.session.Session()
    models = {}
    for service in IAM_PREFIXES:
        client = session.client(service, region_name="us-east-1")
        waiters = {xform: client.get_waiter(xform).config.operation for xform in client.waiter_names}
        models[service] = (dict(client.meta.method_to_api_mapping), waiters)
    return models


def iam_actions(calls: list[ClientCall]) -> tuple[set[str], list[str]]:
    """The IAM actions (``prefix:Operation``) the calls need, and the calls that match no operation
    or more than one."""
    actions: set[str] = set()
    problems: list[str] = []
    for call in calls:
        if call.service is not None and call.service not in IAM_PREFIXES:
            problems.append(f"{call.where}: a {call.service!r} client; add its IAM prefix to IAM_PREFIXES")
            continue
        services = [call.service] if call.service else list(IAM_PREFIXES)
        table = 1 if call.kind == "waiter" else 0
        matches = [(service, service_models()[service][table][call.method]) for service in services if call.method in service_models()[service][table]]
        if len(matches) != 1:
            found = "no" if not matches else "more than one"
            problems.append(f"{call.where}: {call.kind} {call.method!r} matches {found} operation of {', '.join(services)}")
            continue
        service, operation = matches[0]
        actions.add(f"{IAM_PREFIXES[service]}:{operation}")
    return actions, problems


def shipped_sources() -> list[Path]:
    return sorted(path for package in shipped_packages() for path in (ROOT / package).rglob("*.py") if "__pycache__" not in path.parts)


@lru_cache(maxsize=None)
def shipped_client_calls() -> tuple[tuple[ClientCall, ...], tuple[str, ...]]:
    calls, problems = [], []
    for path in shipped_sources():
        found, unreadable = client_calls(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
        calls += found
        problems += unreadable
    return tuple(calls), tuple(problems)


def scan(extra_sources: dict[str, str] | None = None) -> tuple[set[str], list[str]]:
    """The IAM actions the shipped code (plus ``extra_sources``, {filename: source}) needs, and any problems."""
    shipped, shipped_problems = shipped_client_calls()
    calls, problems = list(shipped), list(shipped_problems)
    for filename, source in (extra_sources or {}).items():
        found, unreadable = client_calls(source, filename)
        calls += found
        problems += unreadable
    actions, unmatched = iam_actions(calls)
    return actions, problems + unmatched


@lru_cache(maxsize=None)
def policy() -> dict:
    return json.loads(IAM_POLICY.read_text(encoding="utf-8"))


def statements(document: dict | None = None) -> list[dict]:
    """The policy's statements (``document``: another policy, default deploy/iam-policy.json)."""
    found = (policy() if document is None else document)["Statement"]
    return [found] if isinstance(found, dict) else found


def as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def policy_actions() -> set[str]:
    return {action for statement in statements() for action in as_list(statement["Action"])}


def test_scanner_reads_direct_paginator_waiter_and_factory_calls() -> None:
    source = '''
class Adapter:
    def run(self):
        self.client.add_job_flow_steps(JobFlowId="j-1", Steps=[])
        for page in self.client.get_paginator("list_steps").paginate(ClusterId="j-1"):
            pass
        self.client.get_waiter("step_complete").wait(ClusterId="j-1", StepId="s-1")
        self.client.meta.events.register("needs-retry", print)
        self.client.close()
        self.store.list_steps()
        watch = cloudwatch_client("us-east-1")
        watch.put_metric_data(Namespace="N", MetricData=[])
        aws_client("ses", "SES").send_raw_email(RawMessage={"Data": b""})
'''
    calls, problems = client_calls(source, "example.py")
    assert problems == []
    assert {(c.method, c.service, c.kind) for c in calls} == {
        ("add_job_flow_steps", None, "call"),
        ("list_steps", None, "paginator"),
        ("step_complete", None, "waiter"),
        ("put_metric_data", "cloudwatch", "call"),
        ("send_raw_email", "ses", "call"),
    }
    assert iam_actions(calls) == (
        {
            "elasticmapreduce:AddJobFlowSteps",
            "elasticmapreduce:ListSteps",
            "elasticmapreduce:DescribeStep",
            "cloudwatch:PutMetricData",
            "ses:SendRawEmail",
        },
        [],
    )


def test_scanner_reports_calls_it_cannot_map_to_one_operation() -> None:
    source = '''
def f(client, name):
    client.get_paginator(name)
    client.reticulate_splines()
    boto3.client("s3").list_buckets()
    ses = ses_client()
    ses.list_steps()
'''
    calls, problems = client_calls(source, "example.py")
    assert problems == ["example.py:3: get_paginator with a name that is not a string literal"]
    _, unmatched = iam_actions(calls)
    assert len(unmatched) == 3
    assert "reticulate_splines" in unmatched[0] and "'s3' client" in unmatched[1] and "list_steps" in unmatched[2]


def test_a_new_client_call_in_the_code_breaks_the_policy_check() -> None:
    extra = {"autoscaler/adapters/extra.py": "def stop(self):\n    self.client.terminate_job_flows(JobFlowIds=[self.cluster_id])\n"}
    actions, problems = scan(extra)
    assert problems == []
    assert actions - policy_actions() == {"elasticmapreduce:TerminateJobFlows"}


def test_every_client_factory_makes_the_service_it_is_listed_for() -> None:
    made: dict[str, set[str]] = {}
    services: set[str] = set()
    for path in shipped_sources():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            service = _factory_service(node)
            if service is not None:
                services.add(service)
            if isinstance(node, ast.FunctionDef) and node.name in CLIENT_FACTORIES:
                made[node.name] = {s for inner in ast.walk(node) if (s := _factory_service(inner)) is not None}
    assert services <= IAM_PREFIXES.keys(), f"clients of services with no IAM prefix here: {services - IAM_PREFIXES.keys()}"
    for factory, service in CLIENT_FACTORIES.items():
        assert made.get(factory) == {service}, f"{factory} makes {made.get(factory)}, expected {service!r}"


def test_iam_policy_allows_exactly_the_operations_the_code_calls() -> None:
    actions, problems = scan()
    assert problems == [], "\n".join(problems)
    allowed = policy_actions()
    assert actions == allowed, (
        f"called but not allowed: {sorted(actions - allowed)}; allowed but never called: {sorted(allowed - actions)}"
    )


def check_allow_statements_only(document: dict) -> None:
    """AssertionError unless ``document`` is a policy of one or more Allow statements, each with
    named actions (no wildcard) on resources."""
    assert document.get("Version") == "2012-10-17", document
    assert statements(document), "the policy has no statement: it allows nothing, and checks over its statements pass vacuously"
    for statement in statements(document):
        assert statement["Effect"] == "Allow", statement
        assert {"Action", "Resource"} <= statement.keys() and not {"NotAction", "NotResource"} & statement.keys(), statement
        assert as_list(statement["Action"]) and as_list(statement["Resource"]), f"a statement with no action or no resource: {statement}"
        assert all("*" not in action for action in as_list(statement["Action"])), statement


def check_scopes(document: dict) -> None:
    """AssertionError unless ``document`` grants EMR on a cluster ARN, SES on a sender identity and
    "*" (all IAM allows) only for CloudWatch, and grants EMR at all (the daemon's core need)."""
    prefixes_granted = {action.split(":")[0] for statement in statements(document) for action in as_list(statement["Action"])}
    assert "elasticmapreduce" in prefixes_granted, "the policy grants no EMR action: the daemon could not resize or add a step"
    for statement in statements(document):
        prefixes = {action.split(":")[0] for action in as_list(statement["Action"])}
        resources = as_list(statement["Resource"])
        if "elasticmapreduce" in prefixes:
            assert all(re.fullmatch(r"arn:aws[\w-]*:elasticmapreduce:[^:*]+:[^:*]+:cluster/.+", r) for r in resources), statement
            # A wildcard cluster id (the role may exist before the cluster does) needs a tag condition.
            if any("*" in r for r in resources):
                conditions = json.dumps(statement.get("Condition", {}))
                assert re.search(r"(aws|elasticmapreduce):ResourceTag/", conditions), statement
        if "ses" in prefixes:
            assert all(re.fullmatch(r"arn:aws[\w-]*:ses:[^:*]+:[^:*]+:identity/[^*]+", r) for r in resources), statement
        if "*" in resources:
            # CloudWatch's GetMetricData and PutMetricData take no resource ARN: "*" is all IAM allows.
            assert prefixes == {"cloudwatch"}, statement


def test_iam_policy_is_valid_json_with_allow_statements_only() -> None:
    check_allow_statements_only(policy())


def test_iam_policy_scopes_emr_to_a_cluster_and_ses_to_a_sender_identity() -> None:
    check_scopes(policy())


@pytest.mark.parametrize(
    "document",
    [{"Version": "2012-10-17", "Statement": []}, {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": [], "Resource": []}]}],
    ids=["no-statement", "a-statement-with-no-action"],
)
def test_the_policy_checks_refuse_an_empty_policy(document: dict) -> None:
    # They passed on one: every check was a loop over no statement.
    with pytest.raises(AssertionError):
        check_allow_statements_only(document)
    with pytest.raises(AssertionError):
        check_scopes(document)


def test_iam_policy_limits_put_metric_data_to_the_publisher_namespace() -> None:
    from autoscaler.adapters.cloudwatch_publish import NAMESPACE

    granting = [s for s in statements() if "cloudwatch:PutMetricData" in as_list(s["Action"])]
    assert granting
    for statement in granting:
        assert statement.get("Condition") == {"StringEquals": {"cloudwatch:namespace": NAMESPACE}}, statement


def test_the_operating_docs_list_the_policy_actions() -> None:
    readme = (ROOT / "docs" / "operating.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"`((?:elasticmapreduce|cloudwatch|ses):[A-Za-z]+)`", readme))
    assert listed == policy_actions()
