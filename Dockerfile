# The benchwatch image: the exporter daemon, and pgbench runs under observation
# (docker-compose run --rm benchwatch run -- pgbench ...). pgbench comes from
# the official postgres image, the same major version as the server.
FROM postgres:15.10-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/benchwatch
COPY . .
RUN scripts/ensure-venv
RUN useradd --system --uid 10001 benchwatch && mkdir -p /runs && chown benchwatch /runs
USER benchwatch
ENTRYPOINT ["/opt/benchwatch/benchwatch"]
CMD ["exporter", "--listen=0.0.0.0:19188", "--runs-dir=/runs", "--remote-write-url=http://prometheus:9090/api/v1/write", "--server-log=/var/log/postgresql/postgresql.log"]
