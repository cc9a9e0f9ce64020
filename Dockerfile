# The benchwatch image: the exporter daemon, and pgbench runs under observation
# (docker-compose run --rm benchwatch run -- pgbench ...). pgbench comes from
# the official postgres image, the same major version as the server.
FROM postgres:15.10-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/*
# The package and the files it carries (pyproject's data-files); tests and docs stay out.
COPY pyproject.toml README.md /build/
COPY src /build/src
COPY prometheus /build/prometheus
COPY alertmanager /build/alertmanager
COPY exporters /build/exporters
COPY dashboards /build/dashboards
COPY grafana /build/grafana
COPY scripts /build/scripts
RUN python3 -m venv /opt/benchwatch \
 && /opt/benchwatch/bin/pip install --no-cache-dir /build \
 && rm -rf /build
RUN useradd --system --uid 10001 benchwatch && mkdir -p /runs && chown benchwatch /runs
USER benchwatch
ENTRYPOINT ["/opt/benchwatch/bin/benchwatch"]
CMD ["exporter", "--listen=0.0.0.0:19188", "--runs-dir=/runs", "--remote-write-url=http://prometheus:9090/api/v1/write", "--server-log=/var/log/postgresql/postgresql.log", "--label=target=local", "--label=host=postgres"]
