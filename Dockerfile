# The operator image: `python -m jbod_operator` (kopf), run by the Helm chart in charts/.
# Build from the repository root:  docker build -t jbod-operator .
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Pinned runtime dependencies first, so code changes do not invalidate this layer.
COPY requirements-operator.txt /app/requirements.txt
RUN pip install --no-deps -r /app/requirements.txt

# The operator imports the broker's wire models and client (jbod_broker), so both packages go in.
COPY pyproject.toml README.md /app/src/
COPY broker_image/jbod_broker /app/src/broker_image/jbod_broker
COPY operator/jbod_operator /app/src/operator/jbod_operator
RUN mkdir -p /app/src/spark_apps \
 && pip install --no-deps /app/src \
 && rm -rf /app/src

# Non-root, no home; the chart runs it with a read-only root filesystem and /tmp as emptyDir.
RUN groupadd --system --gid 10001 jbod \
 && useradd --system --uid 10001 --gid jbod --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin jbod
USER 10001:10001

# The brokers-to-controller endpoint, /healthz (liveness) and /readyz (ready = active operator).
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2).status == 200 else 1)"

# Settings come from JBOD_OPERATOR_* variables (operator/jbod_operator/settings.py); a bad one
# stops the operator with exit code 2 and a message naming it.
ENTRYPOINT ["python", "-m", "jbod_operator"]
