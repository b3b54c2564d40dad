/* A hook with no dependencies at all, for the empty-root test (tests/empty_root.rs):
 * compiled with `gcc -static` at test time and run by the static operator binary in
 * a root directory that holds nothing else. With --config it prints an onStartup
 * config; on a run it copies its binding context to /tmp/hook-ran and writes one
 * hook metric. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int copy(const char *from, const char *to) {
    FILE *in = fopen(from, "r");
    FILE *out = fopen(to, "w");
    if (in == NULL || out == NULL) {
        return 1;
    }
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
        fwrite(buf, 1, n, out);
    }
    fclose(in);
    return fclose(out) != 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--config") == 0) {
        puts("{\"configVersion\":\"v1\",\"onStartup\":1}");
        return 0;
    }
    const char *context = getenv("BINDING_CONTEXT_PATH");
    const char *metrics = getenv("METRICS_PATH");
    if (context == NULL || metrics == NULL || copy(context, "/tmp/hook-ran") != 0) {
        fputs("no binding context\n", stderr);
        return 1;
    }
    FILE *m = fopen(metrics, "w");
    if (m == NULL) {
        return 1;
    }
    fputs("{\"name\":\"empty_root_hook_runs_total\",\"add\":1}\n", m);
    return fclose(m) != 0;
}
