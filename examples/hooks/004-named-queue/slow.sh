#!/bin/sh
# A hook on its own queue: its slow runs never hold up the "main" queue. Tasks that
# pile up while it sleeps are combined into one run with several binding contexts.
if [ "$1" = "--config" ]; then
  cat <<'CONFIG'
configVersion: v1
schedule:
- name: slow-every-2s
  crontab: "*/2 * * * * *"
  queue: slow
CONFIG
  exit 0
fi
echo "004-named-queue: handling $(grep -o '"binding"' "$BINDING_CONTEXT_PATH" | wc -l) binding context(s)"
sleep 5
