#!/bin/sh
# A schedule hook: runs every 5 seconds (6-field crontab with leading seconds).
if [ "$1" = "--config" ]; then
  cat <<'CONFIG'
configVersion: v1
schedule:
- name: every-5s
  crontab: "*/5 * * * * *"
CONFIG
  exit 0
fi
echo "003-schedule: $(cat "$BINDING_CONTEXT_PATH")"
