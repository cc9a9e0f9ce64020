"""The run dashboard's annotation of TPS dips, as constants: one region per finished dip
(pgbench_dip_info, written by the exporter's dips collector), titled with its cause."""

NAME = "TPS dips: cause"
EXPR = 'max_over_time(pgbench_dip_info{run_id="$run_id"}[1s])'
TITLE = "TPS dip {{dip}} ({{level}}): {{cause}}"
TEXT = "{{evidence}}"
TAG_KEYS = "cause,level"
COLOUR = "#FADE2A"
