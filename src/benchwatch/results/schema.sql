-- benchwatch's results database (PostgreSQL), schema version 2. docs/results.md describes every column.
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

-- Version 2: the tables Grafana's SQL panels read (the Experiment and History dashboards). A version 1
-- database gets them on its next connection; nothing of version 1 changes.

-- A sweep's verdicts, as its latest `benchwatch report` on that host decided them: one row per variant, cell
-- and measure against the baseline.
CREATE TABLE IF NOT EXISTS sweep_verdicts (
    host            text NOT NULL,
    sweep           text NOT NULL,
    baseline        text NOT NULL,
    variant         text NOT NULL,
    cell            text NOT NULL,
    metric          text NOT NULL,
    clients         integer,
    scale           integer,
    verdict         text,
    ratio           double precision,
    ratio_ci_low    double precision,
    ratio_ci_high   double precision,
    p_value         double precision,
    p_adjusted      double precision,
    n_baseline      integer,
    n_variant       integer,
    min_effect_pct  double precision,
    test            text,
    why             text,
    reported_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (host, sweep, baseline, variant, cell, metric)
);
CREATE INDEX IF NOT EXISTS sweep_verdicts_sweep ON sweep_verdicts (sweep, reported_at);

-- A workload's change points, as the latest `benchwatch history WORKLOAD` on that host found them.
CREATE TABLE IF NOT EXISTS history_change_points (
    host            text NOT NULL,
    workload        text NOT NULL,
    metric          text NOT NULL,
    run_id          text NOT NULL,
    workload_name   text,
    started_at      timestamptz,
    verdict         text NOT NULL,
    step_pct        double precision,
    step_ci_low     double precision,
    step_ci_high    double precision,
    confidence      double precision,
    p_value         double precision,
    mean_before     double precision,
    mean_after      double precision,
    accepted        boolean NOT NULL DEFAULT false,
    changed         jsonb,
    changed_text    text,
    written_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (host, workload, metric, run_id)
);
CREATE INDEX IF NOT EXISTS history_change_points_started ON history_change_points (workload, metric, started_at);

-- A sweep's latest report against its baseline on that host, whole: `benchwatch report NAME --json`'s object,
-- which holds the sweep's plan as the report describes it (tool, argv, engine, order, seed, repeat, the
-- variants, a dsn= variant as "dsn=(given)"), the runs planned and done, every cell with its medians,
-- intervals and run ids, and the differences. Written with the verdicts, in their transaction; not written
-- when it would carry one of the stack's secrets (report says so).
CREATE TABLE IF NOT EXISTS sweep_reports (
    host            text NOT NULL,
    sweep           text NOT NULL,
    baseline        text NOT NULL,
    runs_planned    integer,
    runs_done       integer,
    report          jsonb NOT NULL,
    reported_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (host, sweep, baseline)
);

-- A sweep as its host ran it (`benchwatch sweep`): its plan, written when it starts and again as each of its
-- runs ends (the run ids that count, as they finish) and when it ends, so that `report NAME` on any host
-- reads it. No secret: a dsn= variant's DSN is "(given)", the tool's arguments as the report shows them.
CREATE TABLE IF NOT EXISTS sweeps (
    host            text NOT NULL,
    sweep           text NOT NULL,
    state           text NOT NULL,
    tool            text,
    engine          text,
    baseline        text,
    variants        jsonb,
    cells           jsonb,
    repeat          integer,
    runs_planned    integer,
    runs_done       integer,
    run_ids         jsonb,
    plan            jsonb NOT NULL,
    events          jsonb NOT NULL,
    created_at      timestamptz,
    written_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (host, sweep)
);
CREATE INDEX IF NOT EXISTS sweeps_sweep ON sweeps (sweep);

INSERT INTO benchwatch_schema (version) VALUES (2) ON CONFLICT (version) DO NOTHING;
