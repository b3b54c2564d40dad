"""kopf side of `make bench-peers` (benches/peers.rs): one event handler on Pods
that appends its start time (ns) and the object's name to $OUT, as our sh hook does."""
import os
import time

import kopf

OUT = os.environ["OUT"]


@kopf.on.event("pods")
def seen(name, **_):
    started = time.time_ns()
    with open(OUT, "a") as out:
        out.write(f"{started} {name}\n")
