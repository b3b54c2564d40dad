#!/usr/bin/env python3
"""An onStartup hook in Python: prints its config with --config, else reads its binding context."""
import json
import os
import sys

if len(sys.argv) > 1 and sys.argv[1] == "--config":
    print(json.dumps({"configVersion": "v1", "onStartup": 2}))
    sys.exit(0)

with open(os.environ["BINDING_CONTEXT_PATH"]) as f:
    contexts = json.load(f)
for ctx in contexts:
    print(f"002-startup-python: binding={ctx['binding']}")
