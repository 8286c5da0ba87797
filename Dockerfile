# A Crux worker image: the exact dependency set of requirements.lock, run as an unprivileged
# user, healthy only while the worker polls its task queue (`crux-health`).
# Migrations are not applied here: run `crux db migrate` once per release (the compose file's
# `migrate` service), never from every replica.

FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/crux
WORKDIR /src
# Dependencies first: this layer is rebuilt only when the lock file changes.
COPY requirements.lock ./
RUN /opt/crux/bin/pip install --require-hashes -r requirements.lock
COPY pyproject.toml README.md ./
COPY vocabulary ./vocabulary
COPY planner ./planner
COPY contracts ./contracts
# The published JSON Schemas (package data of `contracts`, linked as contracts/published).
COPY schemas ./schemas
COPY storage ./storage
COPY providers ./providers
COPY telemetry ./telemetry
COPY activities ./activities
COPY workflows ./workflows
COPY crux ./crux
RUN /opt/crux/bin/pip install --no-deps .

FROM python:3.11-slim
RUN groupadd --system --gid 10001 crux \
    && useradd --system --uid 10001 --gid crux --home-dir /home/crux --create-home \
        --shell /usr/sbin/nologin crux
COPY --from=build /opt/crux /opt/crux
ENV PATH=/opt/crux/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    CRUX_LOG_FORMAT=json \
    CRUX_HEALTH_FILE=/tmp/crux/worker.ready
WORKDIR /home/crux
# Numeric, so that orchestrators enforcing runAsNonRoot can verify it.
USER 10001:10001
# The worker writes CRUX_HEALTH_FILE once it polls and refreshes it every 10 s; the check
# fails when the file is missing or older than 30 s.
HEALTHCHECK --interval=15s --timeout=10s --start-period=60s --retries=3 CMD ["crux-health"]
CMD ["crux", "worker"]
