#!/bin/sh
# A global hook: logs startup, and before every converge publishes a global value.
if [ "$1" = "--config" ]; then
  echo '{"configVersion":"v1","onStartup":1,"beforeAll":10}'
  exit 0
fi
echo "global hook ran: $(cat "$BINDING_CONTEXT_PATH")"
echo '[{"op":"add","path":"/global/discovered","value":"cluster-1"}]' > "$VALUES_JSON_PATCH_PATH"
