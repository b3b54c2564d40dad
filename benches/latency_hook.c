/* The latency bench's hook (benches/kube.rs): a static C program, so the time it
 * records is the operator's own part of event -> hook start plus fork/exec, without
 * a shell's or `date`'s start-up. With --config it prints one kubernetes binding on
 * ConfigMaps in namespace "latency"; on a run it appends CLOCK_REALTIME in
 * nanoseconds to the file named by $OUT. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (argc > 1 && strcmp(argv[1], "--config") == 0) {
        puts("{\"configVersion\":\"v1\",\"kubernetes\":[{\"name\":\"b\",\"kind\":\"ConfigMap\","
             "\"namespace\":{\"nameSelector\":{\"matchNames\":[\"latency\"]}},"
             "\"executeHookOnSynchronization\":false}]}");
        return 0;
    }
    const char *out = getenv("OUT");
    FILE *f = out ? fopen(out, "a") : NULL;
    if (f == NULL) {
        return 1;
    }
    fprintf(f, "%lld%09ld\n", (long long)now.tv_sec, now.tv_nsec);
    return fclose(f) != 0;
}
