#!/bin/sh
# An onStartup hook in shell: runs once when the operator starts.
if [ "$1" = "--config" ]; then
  cat <<'CONFIG'
configVersion: v1
onStartup: 1
CONFIG
  exit 0
fi
echo "001-startup-shell: started with binding context $(cat "$BINDING_CONTEXT_PATH")"
