/* Live-heap sampler for the soak (docs/soak.md, "Heap growth (issue 12)").
 *
 * An LD_PRELOAD library that wraps glibc's malloc family and keeps a process-wide
 * count of the bytes and chunks the program holds (malloc_usable_size of every
 * allocation not yet freed). Every 2 s a thread appends one line to the file named
 * by $HEAP_LIVE_OUT:
 *
 *   seconds live_bytes live_chunks uordblks arena hblkhd fordblks
 *
 * the last four from mallinfo2(): glibc's own "in use" (uordblks, what malloc_info
 * reports), the arenas' size, mmapped chunks and free bytes. A structure that grows
 * moves live_bytes; chunks parked in glibc's per-thread caches (tcache) move only
 * uordblks, because the allocator counts them as in use after the program freed them.
 *
 * It clears LD_PRELOAD and HEAP_LIVE_OUT at start, so hooks and other children
 * are not wrapped, and blocks every signal in its thread, so a stop signal still
 * reaches the operator's own signal handling. Built and used by scripts/soak-heap.sh.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);
extern void __libc_free(void *);

static _Atomic long live_bytes, live_chunks;
static char out_path[1024];

static void *counted(void *p) {
  if (p) {
    atomic_fetch_add(&live_bytes, (long)malloc_usable_size(p));
    atomic_fetch_add(&live_chunks, 1);
  }
  return p;
}

static void uncount(void *p) {
  if (p) {
    atomic_fetch_sub(&live_bytes, (long)malloc_usable_size(p));
    atomic_fetch_sub(&live_chunks, 1);
  }
}

void *malloc(size_t n) { return counted(__libc_malloc(n)); }
void *calloc(size_t k, size_t n) { return counted(__libc_calloc(k, n)); }
void *memalign(size_t a, size_t n) { return counted(__libc_memalign(a, n)); }
void *aligned_alloc(size_t a, size_t n) { return memalign(a, n); }
void *valloc(size_t n) { return counted(__libc_valloc(n)); }
void *pvalloc(size_t n) { return counted(__libc_pvalloc(n)); }
void free(void *p) { uncount(p); __libc_free(p); }

int posix_memalign(void **slot, size_t a, size_t n) {
  void *p = memalign(a, n);
  if (!p) return 12; /* ENOMEM */
  *slot = p;
  return 0;
}

void *realloc(void *p, size_t n) {
  if (!p) return malloc(n);
  long before = (long)malloc_usable_size(p);
  void *q = __libc_realloc(p, n);
  if (q) {
    atomic_fetch_add(&live_bytes, (long)malloc_usable_size(q) - before);
  } else if (n == 0) { /* glibc's realloc(p, 0) frees p */
    atomic_fetch_sub(&live_bytes, before);
    atomic_fetch_sub(&live_chunks, 1);
  }
  return q;
}

static void *sampler(void *unused) {
  (void)unused;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    struct mallinfo2 mi = mallinfo2();
    FILE *f = fopen(out_path, "a");
    if (f) {
      fprintf(f, "%ld %ld %ld %zu %zu %zu %zu\n", (long)(now.tv_sec - start.tv_sec),
              atomic_load(&live_bytes), atomic_load(&live_chunks), mi.uordblks, mi.arena,
              mi.hblkhd, mi.fordblks);
      fclose(f);
    }
    sleep(2);
  }
  return NULL;
}

__attribute__((constructor)) static void start_sampler(void) {
  const char *path = getenv("HEAP_LIVE_OUT");
  if (!path) return;
  strncpy(out_path, path, sizeof out_path - 1);
  unsetenv("HEAP_LIVE_OUT");
  unsetenv("LD_PRELOAD");
  pthread_t thread;
  if (pthread_create(&thread, NULL, sampler, NULL) == 0) pthread_detach(thread);
}
