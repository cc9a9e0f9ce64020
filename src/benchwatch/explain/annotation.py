"""The run dashboard's annotation of TPS dips, as constants: one region per finished dip
(benchmark_dip_info, written by the exporter's dips collector), titled with its cause."""

from benchwatch.model import names

NAME = "TPS dips: cause"
# Runs recorded before issue 19 wrote pgbench_dip_info (benchwatch.model.names).
EXPR = "max_over_time(" + names.select("benchmark_dip_info", 'run_id="$run_id"') + "[1s])"
TITLE = "TPS dip {{dip}} ({{level}}): {{cause}}"
TEXT = "{{evidence}}"
TAG_KEYS = "cause,level"
COLOUR = "#FADE2A"
