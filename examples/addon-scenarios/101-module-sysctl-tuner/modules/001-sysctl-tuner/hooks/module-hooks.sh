#!/bin/sh
# Prints which lifecycle binding it runs for, read from the binding context with jq
# (in the scratch image `jq` is the operator binary itself: its built-in jq).
if [ "$1" = "--config" ]; then
  echo '{"configVersion":"v1","beforeHelm":1,"afterHelm":1,"afterDeleteHelm":1}'
  exit 0
fi
echo "sysctl-tuner hook: $(jq -r '.[0].binding' "$BINDING_CONTEXT_PATH")"
