#!/usr/bin/env bash
# What apt would install for a selection on a base system, without installing anything (docs/benchmarks.md,
# "What the demo installs"): a dpkg status holding this machine's Priority required/important and Essential
# packages and what they depend on stands in for a fresh bookworm; apt simulates against it.
# Usage: bench/bench_demo_installs.sh [SELECTION...]   (python -m benchwatch.stack.packages's arguments)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
mkdir -p "$work/archives/partial"
python3 - "$work/status" <<'PY'
import sys
installed, provides = {}, {}
for stanza in open("/var/lib/dpkg/status").read().split("\n\n"):
    fields = dict(l.split(":", 1) for l in stanza.splitlines() if l and not l[0].isspace() and ":" in l)
    fields = {k: v.strip() for k, v in fields.items()}
    if fields.get("Status", "").endswith(" installed"):
        installed[fields["Package"]] = (fields, stanza.strip())
        for p in fields.get("Provides", "").split(","):
            provides.setdefault(p.strip().split(" ")[0], fields["Package"])
def depends(fields):
    for group in (g for f in ("Pre-Depends", "Depends") for g in fields.get(f, "").split(",") if g.strip()):
        for alt in group.split("|"):
            name = alt.strip().split(" ")[0].split(":")[0]
            if name in installed or name in provides:
                yield name if name in installed else provides[name]
                break
todo = [n for n, (f, _) in installed.items() if f.get("Priority") in ("required", "important") or f.get("Essential") == "yes"]
base = set()
while todo:
    name = todo.pop()
    if name not in base:
        base.add(name)
        todo += depends(installed[name][0])
open(sys.argv[1], "w").write("\n\n".join(installed[n][1] for n in sorted(base)) + "\n")
print(f"base system: {len(base)} packages", file=sys.stderr)
PY
mapfile -t items < <(PYTHONPATH="$here/src" python3 -m benchwatch.stack.packages "$@")
debian=(); for i in "${items[@]}"; do [[ "$i" == go:* ]] || debian+=("$i"); done
opts=(-o "Dir::State::status=$work/status" -o "Dir::Cache::archives=$work/archives")
inst=$(apt-get -s "${opts[@]}" install --no-install-recommends "${debian[@]}" | awk '/^Inst/{print $2}')
download=$(apt-get -y --print-uris "${opts[@]}" install --no-install-recommends "${debian[@]}" |
           awk -F"'" '/^.http/{split($3, a, " "); s += a[2]} END{printf "%.1f", s / 1048576}')
installed=$(for p in $inst; do apt-cache show --no-all-versions "$p" | awk '/^Installed-Size/{s = $2} END{print s}'; done |
            awk '{s += $1} END{printf "%.1f", s / 1024}')
echo "${debian[*]}: $(echo "$inst" | grep -c .) packages, download $download MiB, installed $installed MiB"
