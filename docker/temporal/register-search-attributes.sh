#!/bin/sh
# Registers the Keyword search attributes that Crux workflows set, once, before any worker
# starts (the worker only checks them: CRUX_REGISTER_SEARCH_ATTRIBUTES=false). Idempotent:
# attributes that exist are left alone. Reads TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE.
set -eu
NAMESPACE="${TEMPORAL_NAMESPACE:-default}"
NAMES="CruxThreadId CruxGenerationId CruxStage CruxModel"

# The server creates its default namespace shortly after its frontend turns healthy.
tries=0
until temporal operator namespace describe --namespace "$NAMESPACE" >/dev/null 2>&1; do
  tries=$((tries + 1))
  if [ "$tries" -ge 60 ]; then
    echo "namespace $NAMESPACE not found on ${TEMPORAL_ADDRESS:-127.0.0.1:7233}" >&2
    exit 1
  fi
  sleep 2
done

registered() {
  temporal operator search-attribute list --namespace "$NAMESPACE" | grep -qw "$1"
}

for name in $NAMES; do
  if ! registered "$name"; then
    temporal operator search-attribute create --namespace "$NAMESPACE" --name "$name" --type Keyword
  fi
done
for name in $NAMES; do
  if ! registered "$name"; then
    echo "search attribute $name is still missing in namespace $NAMESPACE" >&2
    exit 1
  fi
done
echo "search attributes registered in namespace $NAMESPACE: $NAMES"
