#!/bin/sh
# The dqnflow role and database, beside Temporal's databases in the same
# PostgreSQL. The postgres image runs this once, when it initialises an empty
# data volume (docker-entrypoint-initdb.d); `docker compose down -v` starts
# over. The tables themselves come from `dqnflow migrate` (dqnflow-migrate).
#
# The password is DQNFLOW_DB_PASSWORD (default dqnflow); it goes into
# DATABASE_URL as is, so keep it free of URL-special characters.
set -e

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  -v dqnflow_password="${DQNFLOW_DB_PASSWORD:-dqnflow}" <<'SQL'
CREATE ROLE dqnflow LOGIN PASSWORD :'dqnflow_password';
CREATE DATABASE dqnflow OWNER dqnflow;
SQL
