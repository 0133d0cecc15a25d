#!/usr/bin/env bash
# EMR bootstrap action: installs the autoscaler daemon on the cluster's master node and starts it
# as the systemd service autoscaler.service. On every other node it does nothing.
#
# Usage: upload this script, the package and a config to S3, then create the cluster with
#
#   aws emr create-cluster --release-label emr-7.2.0 --step-concurrency-level 20 ... \
#     --bootstrap-actions 'Name=autoscaler,Path=s3://BUCKET/autoscaler/bootstrap-action.sh,Args=[s3://BUCKET/autoscaler/deferral_autoscaler-0.1.0-py3-none-any.whl,s3://BUCKET/autoscaler/config.toml]'
#
# Arguments:
#   PACKAGE_URI  S3 URI of the package: a wheel (.whl, from `pip wheel --no-deps .`) or an sdist (.tar.gz).
#   CONFIG_URI   S3 URI of the TOML config (deploy/example-config.toml lists every field), installed as
#                /etc/autoscaler/config.toml. cluster.id may be left out: this cluster's id is set below.
#                Set store_path = "/var/lib/autoscaler/autoscaler.db": a relative path is resolved
#                against the working directory of whoever runs `autoscaler`.
#   UNIT_URI     Optional: S3 URI of a systemd unit to install instead of the copy at the end of this
#                script (deploy/autoscaler.service).
#
# What it does on the master node, as root:
#   - finds Python >= 3.10 (on Amazon Linux 2023, EMR 7.x, it installs python3.11 with dnf; older
#     releases on Amazon Linux 2 have no such Python and the script stops with a message);
#   - creates the system user "autoscaler" and its data directory /var/lib/autoscaler;
#   - installs the package into the virtual environment /opt/autoscaler/.venv (pip fetches the
#     dependencies from PyPI, or from the index set in /etc/pip.conf);
#   - installs the config and checks it, so a bad config fails the bootstrap, not the daemon later;
#   - writes /etc/autoscaler/env (read by the unit): AUTOSCALER_CLUSTER__ID, this cluster's id from
#     /mnt/var/lib/info/job-flow.json, which wins over the config's, and AWS_DEFAULT_REGION, this
#     instance's region, which boto3 does not look up on EC2 by itself (the config's cluster.region,
#     when set, wins). Add AUTOSCALER_SMTP_PASSWORD there by hand when reports go by SMTP;
#   - installs the unit and starts it.
#
# Requirements: the cluster's EC2 instance profile allows deploy/iam-policy.json (and s3:GetObject on
# the URIs above); the cluster uses instance groups with a TASK group, and has one primary node (with
# three, each would run a daemon with a store of its own). Bootstrap actions run before the cluster
# is up, so the daemon's first slots may fail to resize the TASK group; each such slot is logged and
# decided again at the next slot.
#
# Jobs are submitted on the master node as the service user, with the service's environment:
#
#   sudo -u autoscaler bash -c 'set -a; . /etc/autoscaler/env; cd /var/lib/autoscaler &&
#     exec /opt/autoscaler/.venv/bin/autoscaler "$@"' autoscaler submit --config /etc/autoscaler/config.toml ...
#
# EMR_INFO_DIR overrides /mnt/var/lib/info, where EMR describes the node and the cluster.

set -euo pipefail

readonly INFO_DIR="${EMR_INFO_DIR:-/mnt/var/lib/info}"
readonly VENV=/opt/autoscaler/.venv
readonly CONFIG_DIR=/etc/autoscaler
readonly DATA_DIR=/var/lib/autoscaler
readonly SERVICE_USER=autoscaler
readonly UNIT_PATH=/etc/systemd/system/autoscaler.service

die() {
  echo "bootstrap-action: $*" >&2
  exit 1
}

usage() {
  die "usage: $0 s3://.../PACKAGE.whl|.tar.gz s3://.../config.toml [s3://.../autoscaler.service]"
}

# json_field FILE KEY: prints the top-level KEY of the JSON object in FILE, a string as is and any
# other value as JSON (true, false, null). EMR's info files are JSON, and python3 is on every EMR
# node while jq is not.
json_field() {
  python3 - "$1" "$2" <<'PY'
import json
import sys

with open(sys.argv[1], encoding="utf-8") as file:
    value = json.load(file).get(sys.argv[2])
print(value if isinstance(value, str) else json.dumps(value))
PY
}

# find_python: prints the path of the first Python >= 3.10 on PATH (the package's requires-python).
find_python() {
  local candidate
  for candidate in python3.12 python3.11 python3.10 python3; do
    if command -v "$candidate" >/dev/null 2>&1 \
      && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
      command -v "$candidate"
      return 0
    fi
  done
  return 1
}

# imds PATH: reads PATH of the EC2 instance metadata with IMDSv2 (a session token first). Callers
# use it in `|| die`, where set -e is off, so each failure returns explicitly.
imds() {
  local token
  token=$(curl -sSf --retry 3 --max-time 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' \
    http://169.254.169.254/latest/api/token) || return 1
  curl -sSf --retry 3 --max-time 5 -H "X-aws-ec2-metadata-token: $token" "http://169.254.169.254/latest/$1"
}

main() {
  [[ $# -ge 2 && $# -le 3 ]] || usage
  local package_uri=$1 config_uri=$2 unit_uri=${3:-}
  case "$package_uri" in
    s3://*.whl | s3://*.tar.gz) ;;
    *) die "PACKAGE_URI must be an s3:// URI of a .whl or .tar.gz, got '$package_uri'" ;;
  esac
  [[ "$config_uri" == s3://* ]] || die "CONFIG_URI must be an s3:// URI, got '$config_uri'"
  [[ -z "$unit_uri" || "$unit_uri" == s3://* ]] || die "UNIT_URI must be an s3:// URI, got '$unit_uri'"

  # Bootstrap actions run on every node; only the master node runs the daemon. A missing file or a
  # missing or non-boolean isMaster stops the bootstrap: guessing would leave a cluster either
  # without its autoscaler or with one per node.
  [[ -r "$INFO_DIR/instance.json" ]] || die "$INFO_DIR/instance.json not found: is this an EMR node?"
  local is_master
  is_master=$(json_field "$INFO_DIR/instance.json" isMaster) || die "cannot read $INFO_DIR/instance.json"
  case "$is_master" in
    true) ;;
    false)
      echo "bootstrap-action: not the master node; nothing to do"
      exit 0
      ;;
    *) die "$INFO_DIR/instance.json: expected isMaster true or false, got $is_master" ;;
  esac

  # EMR runs bootstrap actions as the hadoop user, which may sudo without a password.
  if [[ $EUID -ne 0 ]]; then
    exec sudo -n env EMR_INFO_DIR="$INFO_DIR" bash "$0" "$@"
  fi

  local cluster_id region
  cluster_id=$(json_field "$INFO_DIR/job-flow.json" jobFlowId) || die "cannot read $INFO_DIR/job-flow.json"
  [[ "$cluster_id" =~ ^j-[0-9A-Za-z]+$ ]] || die "$INFO_DIR/job-flow.json: expected a jobFlowId like j-2AXXXXXXGAPLF, got '$cluster_id'"
  region=$(imds meta-data/placement/region) || die "cannot read this instance's region from the instance metadata"
  [[ "$region" =~ ^[a-z]{2}(-[a-z]+)+-[0-9]+$ ]] || die "unexpected region '$region' from the instance metadata"

  local python
  if ! python=$(find_python); then
    if command -v dnf >/dev/null 2>&1; then
      dnf install -y -q python3.11 python3.11-pip
    fi
    python=$(find_python) || die "needs Python >= 3.10; use an EMR 7.x release (Amazon Linux 2023)"
  fi

  local workdir
  workdir=$(mktemp -d)
  # shellcheck disable=SC2064  # expand now: workdir is local to main
  trap "rm -rf '$workdir'" EXIT
  local package_file="$workdir/${package_uri##*/}"
  aws s3 cp --only-show-errors "$package_uri" "$package_file"
  aws s3 cp --only-show-errors "$config_uri" "$workdir/config.toml"
  if [[ -n "$unit_uri" ]]; then
    aws s3 cp --only-show-errors "$unit_uri" "$workdir/autoscaler.service"
  else
    default_unit >"$workdir/autoscaler.service"
  fi

  if ! id -u "$SERVICE_USER" >/dev/null 2>&1; then
    useradd --system --user-group --home-dir "$DATA_DIR" --no-create-home \
      --shell "$(command -v nologin || echo /bin/false)" "$SERVICE_USER"
  fi
  install -d -o "$SERVICE_USER" -g "$SERVICE_USER" -m 0750 "$DATA_DIR"
  install -d -o root -g "$SERVICE_USER" -m 0750 "$CONFIG_DIR"

  "$python" -m venv "$VENV"
  "$VENV/bin/pip" install --no-cache-dir --disable-pip-version-check "$package_file"

  # The service user reads both files; the environment file may hold the SMTP password, so no one else does.
  install -m 0640 -o root -g "$SERVICE_USER" "$workdir/config.toml" "$CONFIG_DIR/config.toml"
  printf '%s\n' \
    "# Written by the EMR bootstrap action; read by autoscaler.service. KEY=value lines." \
    "AUTOSCALER_CLUSTER__ID=$cluster_id" \
    "AWS_DEFAULT_REGION=$region" >"$workdir/env"
  install -m 0640 -o root -g "$SERVICE_USER" "$workdir/env" "$CONFIG_DIR/env"

  AUTOSCALER_CLUSTER__ID="$cluster_id" AWS_DEFAULT_REGION="$region" "$VENV/bin/python" - "$CONFIG_DIR/config.toml" <<'PY'
import sys

from autoscaler.config import load_settings
from autoscaler.errors import ConfigError

try:
    settings = load_settings(sys.argv[1])
except ConfigError as error:
    sys.exit(f"bootstrap-action: {error}")
if not settings.store_path.is_absolute():
    print(
        f"bootstrap-action: warning: store_path {str(settings.store_path)!r} is relative; the service keeps "
        "it in /var/lib/autoscaler, but `autoscaler submit` run from elsewhere opens another store",
        file=sys.stderr,
    )
PY

  install -m 0644 "$workdir/autoscaler.service" "$UNIT_PATH"
  systemctl daemon-reload
  systemctl enable --now autoscaler.service
  echo "bootstrap-action: autoscaler.service started for cluster $cluster_id in $region"
}

# The systemd unit installed when no UNIT_URI is given: a copy of deploy/autoscaler.service
# (tests/unit/test_deploy.py checks the two are the same).
default_unit() {
  cat <<'UNIT'
# The autoscaler daemon as a systemd service (deploy/bootstrap-action.sh installs it on an EMR
# master node). Expects the package in /opt/autoscaler/.venv, the config in
# /etc/autoscaler/config.toml and a system user "autoscaler".
#
# /etc/autoscaler/env (optional, KEY=value lines, mode 0640 root:autoscaler) holds what differs
# per cluster or must stay out of the config: AUTOSCALER_CLUSTER__ID, AWS_DEFAULT_REGION,
# AUTOSCALER_SMTP_PASSWORD. Keep store_path under /var/lib/autoscaler (the default,
# "autoscaler.db", is relative to the working directory): nothing else is writable.

[Unit]
Description=Deadline-aware, energy-saving autoscaler for an EMR cluster's TASK group
Wants=network-online.target
After=network-online.target

[Service]
Type=simple
User=autoscaler
Group=autoscaler
EnvironmentFile=-/etc/autoscaler/env
Environment=PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
WorkingDirectory=/var/lib/autoscaler
# Creates /var/lib/autoscaler owned by the service user if it is missing.
StateDirectory=autoscaler
StateDirectoryMode=0750
ExecStart=/opt/autoscaler/.venv/bin/autoscaler run --config /etc/autoscaler/config.toml

# Start-up exits by what failed (autoscaler/core/errors.py):
#   2   a bad config or a wrong cluster: a cluster.id EMR does not have in cluster.region, an
#       ended cluster, an instance-fleet cluster, no TASK group, a region botocore does not know,
#       AWS refusing access. A restart cannot mend it: not restarted (RestartPreventExitStatus);
#       fix the config, then `systemctl restart autoscaler`. `systemctl status autoscaler` and
#       the journal show the line that names the setting.
#   75  EX_TEMPFAIL: EMR kept throttling, answering 5xx or could not be reached for the whole
#       start-up wait (300 s, each try logged as `startup_retry`). Restarted after RestartSec,
#       and so on until AWS answers.
# A crash or a kill (any other status, or a signal) is restarted too. 30 s apart, restarts never
# reach the default start limit (5 starts in 10 s), so they go on for as long as an outage lasts.
Restart=on-failure
RestartPreventExitStatus=2
RestartSec=30

# SIGTERM lets the slot in progress finish (its AWS calls include botocore's retries and backoff)
# and the daily report, when it is running, finish too; SIGKILL only after that.
KillSignal=SIGTERM
TimeoutStopSec=600

# Hardening: the daemon only needs outbound HTTPS to AWS (and SMTP), its data directory, and
# read access to its config.
NoNewPrivileges=yes
ProtectSystem=strict
ReadWritePaths=/var/lib/autoscaler
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
ProtectProc=invisible
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
RemoveIPC=yes
PrivateMounts=yes
CapabilityBoundingSet=
AmbientCapabilities=
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallErrorNumber=EPERM
UMask=0027
# MemoryDenyWriteExecute is left off: ctypes/cffi callbacks in the numeric and solver libraries
# may need writable, executable memory, and a failure there would only show at a solve.

[Install]
WantedBy=multi-user.target
UNIT
}

main "$@"
