#!/bin/sh
if [ "$1" = "--config" ]; then
  echo '{"configVersion":"v1","onStartup":1}'
  exit 0
fi
echo "frontend module started (a symlinked module)"
