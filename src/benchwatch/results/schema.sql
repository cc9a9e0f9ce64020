-- benchwatch's results database (PostgreSQL), schema version 1. docs/results.md describes every column.
-- Applied by benchwatch.results.store.Store.ensure_schema: every statement may run again (IF NOT EXISTS).

CREATE TABLE IF NOT EXISTS benchwatch_schema (
    version     integer PRIMARY KEY,
    applied_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS runs (
    run_id           text PRIMARY KEY,
    host             text NOT NULL,
    started_at       timestamptz,
    ended_at         timestamptz,
    state            text,
    tool             text,
    engine           text,
    exit_code        integer,
    workload         text,
    pooled_workload  text,
    workload_key     jsonb,
    figures          jsonb,
    meta             jsonb NOT NULL,
    summary          jsonb,
    settings         jsonb,
    stability        jsonb,
    profile          jsonb,
    written_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS runs_host_started ON runs (host, started_at);
CREATE INDEX IF NOT EXISTS runs_workload ON runs (workload);
CREATE INDEX IF NOT EXISTS runs_pooled_workload ON runs (pooled_workload);

CREATE TABLE IF NOT EXISTS run_files (
    run_id    text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    name      text NOT NULL,
    kind      text NOT NULL,
    encoding  text NOT NULL,
    size      bigint NOT NULL,
    data      bytea NOT NULL,
    PRIMARY KEY (run_id, name)
);

CREATE TABLE IF NOT EXISTS history_state (
    host        text NOT NULL,
    kind        text NOT NULL,
    content     jsonb NOT NULL,
    written_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (host, kind)
);

INSERT INTO benchwatch_schema (version) VALUES (1) ON CONFLICT (version) DO NOTHING;
