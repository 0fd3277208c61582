#!/bin/sh
# Temporal's schema set-up, run once per `docker compose up` by the
# temporal-admin-tools service (temporalio/admin-tools image).
#
# Creates the temporal and temporal_visibility databases and brings both to
# the schema versions shipped with this admin-tools release. Re-running is
# safe: create-database ignores an existing database, setup-schema -v 0.0
# leaves a newer schema version alone, and update-schema applies only the
# versions that are missing (this is also how a Temporal upgrade migrates).
#
# Connection settings come from the environment: SQL_PLUGIN (postgres12),
# SQL_HOST, SQL_PORT, SQL_USER, SQL_PASSWORD.
set -eu

: "${SQL_PLUGIN:?}" "${SQL_HOST:?}" "${SQL_USER:?}" "${SQL_PASSWORD:?}"
SCHEMA_ROOT="${TEMPORAL_SCHEMA_ROOT:-/etc/temporal/schema/postgresql/v12}"

for pair in temporal:temporal temporal_visibility:visibility; do
  db="${pair%%:*}"
  dir="${SCHEMA_ROOT}/${pair#*:}/versioned"
  echo "dqnflow: Temporal schema for database ${db} from ${dir}"
  temporal-sql-tool --db "${db}" create-database
  temporal-sql-tool --db "${db}" setup-schema -v 0.0
  temporal-sql-tool --db "${db}" update-schema -d "${dir}"
done
echo "dqnflow: Temporal schemas are up to date"
