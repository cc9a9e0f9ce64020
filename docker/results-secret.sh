#!/bin/sh
# The results database's password, from docker-compose's secret results_db_password (a file: never an
# environment value of the compose file, never argv), handed to the process this starts:
#   results-secret.sh pgpass COMMAND ARGS...  writes a 0600 pgpass file for libpq (benchwatch's DSN names it
#                                             as passfile=), then runs COMMAND
#   results-secret.sh env COMMAND ARGS...     runs COMMAND with BENCHWATCH_RESULTS_DB_PASSWORD in its environment
#                                             (Grafana: its provisioning reads the variable, it has no libpq)
set -eu
secret=${RESULTS_DB_SECRET:-/run/secrets/results_db_password}
if [ "$#" -lt 2 ]; then
    echo "usage: $0 pgpass|env COMMAND [ARGS...]" >&2
    exit 2
fi
mode=$1
shift
if [ ! -r "$secret" ]; then
    echo "$0: cannot read the results database's password at $secret (docker-compose's secret results_db_password: RESULTS_DB_PASSWORD_FILE)" >&2
    exit 2
fi
password=$(cat "$secret")  # (without its trailing newlines)
if [ -z "$password" ]; then
    echo "$0: $secret is empty: put the results database's password in it" >&2
    exit 2
fi
case $password in
    *"
"*) echo "$0: $secret holds more than one line: put the password alone in it" >&2
        exit 2 ;;
esac
case $mode in
    pgpass)
        file=${BENCHWATCH_RESULTS_PGPASS:-/tmp/benchwatch-results-pgpass}
        umask 077
        # pgpass fields escape ":" and "\" with "\"
        printf '*:*:*:*:%s\n' "$(printf '%s' "$password" | sed 's/[\\:]/\\&/g')" > "$file.tmp"
        mv "$file.tmp" "$file"
        exec "$@" ;;
    env)
        BENCHWATCH_RESULTS_DB_PASSWORD=$password
        export BENCHWATCH_RESULTS_DB_PASSWORD
        exec "$@" ;;
    *)
        echo "$0: $mode: say pgpass or env" >&2
        exit 2 ;;
esac
