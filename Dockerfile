# Skiff: a NATS server with JetStream, in Python.
#   docker build -t skiff .
#   docker run -p 4222:4222 -p 8222:8222 -v skiff-data:/data skiff
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY skiff ./skiff
COPY protocol ./protocol
COPY server ./server
COPY storage ./storage
COPY spark/pyspark_jetstream ./spark/pyspark_jetstream
COPY spark/_packaging ./spark/_packaging
RUN pip install . && useradd --system --uid 1000 --home /data skiff && mkdir -p /data && chown skiff /data

USER skiff
VOLUME ["/data"]
EXPOSE 4222 8222
# /healthz answers 200 once the server is up (and JetStream is healthy); it needs the monitoring port (-m 8222).
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=5 \
  CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8222/healthz', timeout=2).status == 200 else 1)"]
# The server is PID 1 itself (no wrapper), so SIGTERM stops it cleanly and SIGKILL stops it at once.
ENTRYPOINT ["skiff"]
CMD ["-js", "-sd", "/data", "-m", "8222"]
