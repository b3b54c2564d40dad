/* The `ours, stamped at exec` hook of `make bench-peers` (benches/peers/contender.rs):
 * a static program that takes CLOCK_REALTIME first thing, so the time is the hook's
 * start itself, then execs the same `#!/bin/sh` hook body as the plain `ours` run
 * (named by $HOOK_BODY) with the time in $HOOK_STARTED_NS. The body does the same
 * work either way; only where the start time is taken differs. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    struct timespec now;
    char stamp[32];
    const char *body = getenv("HOOK_BODY");
    (void)argc;
    clock_gettime(CLOCK_REALTIME, &now);
    snprintf(stamp, sizeof stamp, "%lld%09ld", (long long)now.tv_sec, now.tv_nsec);
    if (body == NULL || setenv("HOOK_STARTED_NS", stamp, 1) != 0) {
        return 2;
    }
    argv[0] = (char *)body;
    execv(body, argv);
    perror("execv $HOOK_BODY");
    return 127;
}
