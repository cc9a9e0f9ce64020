"""The sweep's loop: each planned run that is not done yet, as an ordinary benchwatch run, with its
variant's server settings applied (and put back afterwards), its cell's options, the database made ready
(tables re-created per scale, a checkpoint, pgbench_history emptied), and a failed run retried once.

Everything it does goes to the experiment's state file before the next step, so a kill at any moment
loses at most the run under way, which ``--resume`` redoes. What it acts on is injected (:class:`Hooks`):
the recording of a run, the server's control, the tool's re-initialisation, a before= command, a clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchwatch import loadgens
from benchwatch.engines import ServerControl, SettingsError
from benchwatch.experiment import plan as plans
from benchwatch.experiment.figures import run_figures
from benchwatch.experiment.spec import Cell, Variant

# A run with no TPS in its summary, aborted clients or a non-zero exit is not used: retried once.
ATTEMPTS = 2
# The exit code of a tool ended by SIGINT (the shell's 128 + 2, as benchwatch run reports it).
INTERRUPTED = 130


@dataclass
class Hooks:
    # (argv, run_info labels, variant) -> (exit code, run directory path or None: could not start)
    record: Callable[[list[str], dict[str, str], Variant], tuple[int, str | None]]
    # variant -> the control of the server it runs on (None: benchwatch cannot act on it)
    control: Callable[[Variant], ServerControl | None]
    # (tool argv, variant) -> exit code: re-create the tables (pgbench -i, sysbench cleanup+prepare)
    init: Callable[[list[str], Variant], int]
    # (shell command) -> exit code: a before= command
    shell: Callable[[str], int]
    cores: int = 1
    clock: Callable[[], float] = time.monotonic


@dataclass
class Outcome:
    ran: int = 0
    failed: list[int] = field(default_factory=list)  # indices still without a good run
    interrupted: bool = False


def cell_argv(argv: list[str], cell: Cell, cores: int) -> list[str]:
    """The tool's argv for one cell: its client count and --arg values (its scale is the tables')."""
    generator = loadgens.for_program(argv[0])
    args = list(argv[1:])
    if cell.clients is not None:
        args = generator.with_clients(args, cell.clients, cores)
    for option, value in cell.args:
        args = generator.with_option(args, option, value)
    return [argv[0], *args]


def warmup_argv(argv: list[str], seconds: float) -> list[str] | None:
    generator = loadgens.for_program(argv[0])
    if not generator.duration_option:
        return None
    return [argv[0], *generator.with_option(list(argv[1:]), generator.duration_option, str(int(max(1, seconds))))]


class Sweep:
    def __init__(self, plan: plans.Plan, sdir: plans.SweepDir, hooks: Hooks, say: Callable[[str], None]):
        self.plan = plan
        self.sdir = sdir
        self.hooks = hooks
        self.say = say
        self.applied: str | None = None       # the variant whose settings are on the server
        self.scale_ready: dict[str, int | None] = {}  # server key -> the scale its tables are at
        self.cell_ready: dict[str, int] = {}  # server key -> the cell its tables were made for
        self.durations: list[float] = []
        self.last_end: float | None = None
        self.unsettled: dict[str, Variant] = {}  # server key -> a variant of it, a run on it since its checkpoint

    # -- the server's settings ----------------------------------------------------------------

    def _settings_variant(self, v: Variant) -> bool:
        return bool(v.settings)

    def _restore(self) -> None:
        if self.applied is None:
            return
        v = self.plan.variant(self.applied)
        control = self.hooks.control(v)
        originals = {k: self.plan.originals[k] for k in v.settings if k in self.plan.originals}
        done = control.restore(originals) if control is not None else []
        self.sdir.append("settings_restored", variant=v.name, done=done)
        self.applied = None

    def _apply(self, v: Variant) -> None:
        if self.applied == v.name:
            return
        self._restore()
        if not self._settings_variant(v):
            return
        control = self.hooks.control(v)
        if control is None:
            raise SettingsError(f"variant {v.name}: benchwatch cannot change this server's settings")
        # Recorded first: a kill while they apply still leaves the record that they must be put back.
        self.sdir.append("settings_applying", variant=v.name, settings=v.settings)
        self.applied = v.name
        done = control.apply(v.settings)
        self.sdir.append("settings_applied", variant=v.name, done=done)
        self.say(f"sweep {self.plan.name}: variant {v.name}: {'; '.join(done)}")

    def recover(self, events: list[dict[str, Any]]) -> None:
        """After a kill: settings a variant left applied are put back before anything else."""
        last = None
        for e in events:
            if e.get("event") == "settings_applying":
                last = e.get("variant")
            elif e.get("event") == "settings_restored":
                last = None
        if last is not None:
            self.say(f"sweep {self.plan.name}: variant {last}'s settings were left applied by the interrupted sweep: "
                     "putting them back")
            self.applied = str(last)
            self._restore()

    # -- one run -------------------------------------------------------------------------------

    def _server_key(self, v: Variant) -> str:
        # Each bindir= variant starts a server of its own (its data directory is the variant's), even when two
        # variants name the same build (an A/A of one build): its tables are its own too.
        return f"bindir {v.name}" if v.bindir else v.dsn or v.target or ""

    def _prepare(self, run: plans.PlannedRun, v: Variant, cell: Cell, argv: list[str]) -> list[str]:
        """The database made ready for the run: what was done."""
        done: list[str] = []
        key = self._server_key(v)
        reinit = self.plan.reinit
        if cell.scale is not None or reinit:
            again = (reinit == "run" or (reinit == "cell" and self.cell_ready.get(key) != run.cell)
                     or self.scale_ready.get(key, -1) != cell.scale)
            if again:
                generator = loadgens.for_program(argv[0])
                steps = generator.init_argvs(list(self.plan.argv[1:]), cell.scale)
                if not steps:
                    raise SettingsError(f"{generator.title}: benchwatch does not know how to re-create its tables "
                                        "(--scale, --reinit)")
                for step in steps:
                    code = self.hooks.init([argv[0], *step], v)
                    if code != 0:
                        raise RunFailed(f"re-creating the tables ({' '.join(step)}) exited with {code}")
                    done.append(" ".join([argv[0], *step]))
                self.scale_ready[key] = cell.scale
                self.cell_ready[key] = run.cell
        if v.before:
            code = self.hooks.shell(v.before)
            if code != 0:
                raise RunFailed(f"the before= command exited with {code}")
            done.append(f"before: {v.before}")
        if self.plan.checkpoint:
            done += self._settle_others(key)
        control = self.hooks.control(v)
        if control is not None:
            done += control.before_run(self.plan.checkpoint)
        self.unsettled[key] = v
        return done

    def _settle_others(self, key: str) -> list[str]:
        """The other servers of the sweep that ran since their checkpoint, checkpointed now: idle during this
        run, each would otherwise write what its run left dirty by a timed checkpoint during this one."""
        done = []
        for other, v in list(self.unsettled.items()):
            if other == key:
                continue
            control = self.hooks.control(v)
            if control is not None:
                done += [f"{what} on {v.name}'s server (idle during this run)" for what in control.settle()]
            del self.unsettled[other]
        return done

    def _attempt(self, run: plans.PlannedRun, attempt: int) -> tuple[bool, str | None, str | None]:
        v = self.plan.variant(run.variant)
        cell = self.plan.cells[run.cell]
        argv = cell_argv(self.plan.argv, cell, self.hooks.cores)
        info = {"sweep": self.plan.name, "variant": v.name, "cell": cell.name, "repeat": str(run.repeat)}
        start = self.hooks.clock()
        try:
            self._apply(v)
            done = self._prepare(run, v, cell, argv)
            if self.plan.warmup_s > 0:
                warm = warmup_argv(argv, self.plan.warmup_s)
                if warm is not None:
                    self.hooks.record(warm, dict(info, warmup="1"), v)
                    done.append(f"warmup {self.plan.warmup_s:g} s (a run labelled warmup=1, not counted)")
                    if control := self.hooks.control(v):
                        done += control.before_run(False)
        except RunFailed as e:
            self.sdir.append("finished", index=run.index, attempt=attempt, ok=False, run_id=None, why=str(e))
            return False, None, str(e)
        between = self.hooks.clock() - start
        self.sdir.append("started", index=run.index, attempt=attempt, prepared=done, between_s=round(between, 3))
        code, path = self.hooks.record(argv, info, v)
        if path is None:
            refused = f"the run could not start (exit code {code})"
            self.sdir.append("finished", index=run.index, attempt=attempt, ok=False, run_id=None, why=refused)
            return False, None, refused
        figures = run_figures(path)
        if code == INTERRUPTED:
            # Ctrl-C reached the tool from the terminal: the user stops the sweep, the run is not a failure to retry.
            self.sdir.append("finished", index=run.index, attempt=attempt, ok=False, run_id=figures["run_id"],
                             why="interrupted (Ctrl-C)")
            raise KeyboardInterrupt
        reasons = []
        if code != 0:
            reasons.append(f"exit code {code}")
        if figures["aborted_clients"]:
            reasons.append(f"{figures['aborted_clients']} clients aborted")
        if figures["tps"] is None:
            reasons.append("no TPS in its summary")
        why = ", ".join(reasons) or None
        self.sdir.append("finished", index=run.index, attempt=attempt, ok=why is None, run_id=figures["run_id"],
                         # the per-interval TPS stays in the run directory: a long run has thousands
                         why=why, figures={k: v for k, v in figures.items() if k != "interval_tps"},
                         between_s=round(between, 3))
        return why is None, figures["run_id"], why

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> Outcome:
        events = self.sdir.events()
        self.recover(events)
        state = plans.progress(events)
        for index in state.interrupted:
            self.say(f"sweep {self.plan.name}: run {index} was interrupted: running it again")
        todo = state.missing(self.plan)
        total = len(self.plan.runs)
        out = Outcome()
        try:
            for k, run in enumerate(todo):
                v = self.plan.variant(run.variant)
                cell = self.plan.cells[run.cell]
                remaining = len(todo) - k
                eta = (sum(self.durations) / len(self.durations) * remaining) if self.durations else None
                what = ", ".join(p for p in (v.name, cell.words, f"round {run.repeat}") if p)
                self.say(f"sweep {self.plan.name}: run {run.index}/{total} ({what}) - {plans.eta_text(eta)}")
                began = self.hooks.clock()
                ok = False
                for attempt in range(1, ATTEMPTS + 1):
                    ok, run_id, why = self._attempt(run, attempt)
                    if ok:
                        break
                    if attempt < ATTEMPTS:
                        self.say(f"sweep {self.plan.name}: run {run.index} failed ({why}; run {run_id or 'not started'}): "
                                 "not used; retrying it once")
                    else:
                        self.say(f"sweep {self.plan.name}: run {run.index} failed again ({why}): left out of the "
                                 "report (sweep --resume tries it again)")
                out.ran += 1
                if not ok:
                    out.failed.append(run.index)
                self.durations.append(self.hooks.clock() - began)
        except KeyboardInterrupt:
            out.interrupted = True
            self.say(f"sweep {self.plan.name}: interrupted; sweep --resume {self.plan.name} runs what is missing")
        finally:
            self._restore()
        if not out.interrupted:
            self.sdir.append("completed" if not out.failed else "ended", failed=out.failed)
        return out


class RunFailed(Exception):
    """The database could not be made ready for a run (a re-initialisation or a before= command failed)."""
