"""How far Prometheus has acknowledged a run: byte offsets per file, kept in the run directory.

``<run>/.delivered.json`` = ``{"offsets": {path relative to the run dir or absolute: bytes}}``.
Every sample made from the bytes before those offsets was acknowledged by the
remote-write receiver (or given up on, and counted). The exporter writes it as
acknowledgements arrive (benchwatch.sink.remote_write's delivery marks) and,
after a restart, reads the acknowledged bytes again only to rebuild the run
model's state, sending what follows them: nothing lost, long runs not resent.

How bytes are read (polling, inotify) is the follower's business; this keeps
only the numbers.
"""

from __future__ import annotations

import json
import logging
import os

log = logging.getLogger("benchwatch.exporter")

DELIVERED = ".delivered.json"


class DeliveryLog:
    def __init__(self, run_path: str):
        self.run_path = run_path
        self.path = os.path.join(run_path, DELIVERED)
        self.saved: dict[str, int] = {}
        self._failed = False

    def load(self) -> dict[str, int]:
        """The acknowledged offsets; {} when none were recorded or the record is unreadable (then all is sent again)."""
        try:
            with open(self.path, encoding="utf-8") as f:
                raw = json.load(f).get("offsets", {})
            offsets = {str(k): int(v) for k, v in raw.items() if int(v) >= 0}
        except FileNotFoundError:
            offsets = {}
        except (ValueError, TypeError, AttributeError, OSError) as e:
            log.warning("run %s: unreadable %s (%s): sending the run from its start", self.run_path, DELIVERED, e)
            offsets = {}
        self.saved = dict(offsets)
        return offsets

    def save(self, offsets: dict[str, int]) -> bool:
        """Record acknowledged offsets (atomically); False if the disk would not take them (said once)."""
        if offsets == self.saved:
            return True
        tmp = self.path + ".tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({"offsets": offsets}, f, sort_keys=True)
            os.replace(tmp, self.path)
        except OSError as e:
            if not self._failed:
                log.error("run %s: cannot record what Prometheus acknowledged (%s): after a restart the "
                          "unrecorded part is sent again", self.run_path, e)
            self._failed = True
            return False
        self.saved = dict(offsets)
        self._failed = False
        return True
