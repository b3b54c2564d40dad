#!/bin/sh
# One global hook bound to onStartup: addon-operator runs it once when it starts.
if [ "$1" = "--config" ]; then
  echo '{"configVersion":"v1","onStartup":1}'
  exit 0
fi
echo "001-startup-global: the onStartup hook is running"
