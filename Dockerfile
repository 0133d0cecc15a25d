# syntax=docker/dockerfile:1
#
# The autoscaler daemon (`autoscaler run`) in a container.
#
#   docker build -t deferral-autoscaler .
#   docker run -d --name autoscaler --stop-timeout 600 \
#       -v /etc/autoscaler/config.toml:/etc/autoscaler/config.toml:ro \
#       -v autoscaler-data:/var/lib/autoscaler \
#       -e AUTOSCALER_CLUSTER__ID=j-2AXXXXXXGAPLF -e AWS_DEFAULT_REGION=us-east-1 \
#       deferral-autoscaler
#
# Other subcommands run in the same container, so they see the same store and environment:
#   docker exec autoscaler autoscaler submit --config /etc/autoscaler/config.toml --name ... --command ...
#
# The job store is SQLite in /var/lib/autoscaler (the working directory, where the default
# store_path "autoscaler.db" lands): mount a named volume there, or a host directory owned by
# UID 10001, or every restart starts with an empty queue. Credentials come from the usual AWS
# chain (an instance or task role); never bake them into the image. SIGTERM lets the current slot
# finish, which can take longer than Docker's default 10 s stop timeout, hence --stop-timeout.
# /healthz and /metrics listen on 127.0.0.1:9464 inside the container; for Prometheus to scrape
# /metrics from outside, add -e AUTOSCALER_HEALTH_HOST=0.0.0.0 -p 9464:9464.
# Exit status 2 is a bad config or a wrong cluster (restarting cannot help), 75 an AWS outage that
# outlasted the 300 s start-up wait (a later start may succeed). Docker's restart policies cannot
# tell exit statuses apart: `--restart on-failure:10` restarts both, which bounds how often a bad
# config is tried but also how long an outage is waited out (about 10 x 300 s);
# deploy/autoscaler.service restarts on 75 and never on 2.

# Both stages use the same base image: the virtual environment is copied between them and only
# works with the Python it was made by.
FROM python:3.11-slim-bookworm AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# Only what the build needs: the package metadata (its readme is README.md) and the packages
# listed in pyproject.toml. Everything else stays out of the image and out of the layer cache key.
COPY pyproject.toml README.md ./
COPY autoscaler ./autoscaler
COPY cloudwatch ./cloudwatch
COPY energy ./energy

# Runtime dependencies only (no [test] extras). The build tools and the source stay in this stage.
RUN python -m venv /opt/autoscaler/.venv \
    && /opt/autoscaler/.venv/bin/pip install --no-cache-dir .


FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/autoscaler/.venv/bin:$PATH

# A fixed UID/GID so a host directory mounted at /var/lib/autoscaler can be chowned to match.
# Its home is the data directory: matplotlib and fontconfig write their caches under $HOME.
RUN groupadd --system --gid 10001 autoscaler \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/autoscaler --no-create-home \
       --shell /usr/sbin/nologin autoscaler \
    && install -d -o autoscaler -g autoscaler -m 0750 /var/lib/autoscaler \
    && install -d -m 0755 /etc/autoscaler

COPY --from=build /opt/autoscaler/.venv /opt/autoscaler/.venv

WORKDIR /var/lib/autoscaler
USER 10001:10001

# GET /healthz answers 200 while the last successful slot is at most two slots old, 503 otherwise.
# slim images have no curl, so Python's urllib asks; an HTTP error or a refused connection raises,
# and the exit status 1 marks the container unhealthy. The port follows AUTOSCALER_HEALTH_PORT
# when the port is set that way (a port changed only in the config file must be changed here too).
# start-period: start-up imports the solvers, checks the cluster (trying EMR for up to 300 s while it
# throttles or fails: autoscaler.app.compose.STARTUP_WAIT_S) and runs the first slot before /healthz can
# answer 200; failures within it do not count.
HEALTHCHECK --interval=60s --timeout=10s --start-period=420s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('AUTOSCALER_HEALTH_PORT', '9464'), timeout=5)"]

# The daemon handles SIGTERM itself (finish the current slot, then exit); exec form keeps it PID 1
# so it receives the signal.
STOPSIGNAL SIGTERM
ENTRYPOINT ["autoscaler"]
CMD ["run", "--config", "/etc/autoscaler/config.toml"]
