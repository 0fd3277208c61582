#!/bin/sh
# Namespace and search attributes for dqnflow, run once per `docker compose up`
# by the temporal-setup service (temporalio/admin-tools image, `temporal` CLI).
#
#   1. wait until the server answers `temporal operator cluster health`;
#   2. create the namespace (TEMPORAL_NAMESPACE, default "default") unless it
#      exists; the server image creates none by itself;
#   3. register the custom search attributes the workflows upsert. On SQL
#      visibility they belong to a namespace; registering one that exists
#      with the same type is a no-op, with another type an error.
#
# The CLI reads TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE from the environment.
# Every step retries for a bounded time and the script fails loudly after it,
# so `docker compose up` never waits forever and never starts the workers
# against a namespace without its search attributes.
set -eu

: "${TEMPORAL_ADDRESS:?}"
NAMESPACE="${TEMPORAL_NAMESPACE:-default}"
RETENTION="${TEMPORAL_NAMESPACE_RETENTION:-168h}"
TRIES="${SETUP_TRIES:-90}" # two seconds apart: three minutes per step

retry() {
  what="$1"
  shift
  i=1
  until "$@"; do
    if [ "$i" -ge "$TRIES" ]; then
      echo "dqnflow: gave up after ${TRIES} tries: ${what}" >&2
      return 1
    fi
    echo "dqnflow: waiting (${i}/${TRIES}): ${what}"
    i=$((i + 1))
    sleep 2
  done
}

ensure_namespace() {
  temporal operator namespace describe --namespace "$NAMESPACE" >/dev/null 2>&1 ||
    temporal operator namespace create --namespace "$NAMESPACE" --retention "$RETENTION"
}

# Keep in step with workflows.SearchAttributes.
register_search_attributes() {
  temporal operator search-attribute create --namespace "$NAMESPACE" \
    --name DqnEpoch --type Int \
    --name DqnBestValidSharpe --type Double \
    --name DqnStatus --type Keyword
}

# A new namespace reaches the server's caches a few seconds after its
# creation; until then the search attributes may not list.
search_attributes_listed() {
  list="$(temporal operator search-attribute list --namespace "$NAMESPACE")" || return 1
  for name in DqnEpoch DqnBestValidSharpe DqnStatus; do
    echo "$list" | grep -q "$name" || return 1
  done
}

retry "Temporal at ${TEMPORAL_ADDRESS} to serve" temporal operator cluster health
retry "namespace ${NAMESPACE}" ensure_namespace
retry "search attributes in namespace ${NAMESPACE}" register_search_attributes
retry "search attributes to be listed in namespace ${NAMESPACE}" search_attributes_listed
temporal operator search-attribute list --namespace "$NAMESPACE"
echo "dqnflow: namespace ${NAMESPACE} is ready"
