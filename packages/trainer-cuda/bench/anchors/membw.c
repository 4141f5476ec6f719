// Memory read bandwidth: T threads each sum their share of a 1 GiB float array (a plain loop that
// gcc vectorizes and unrolls with -O3 -march=native -ffast-math -funroll-loops), several passes;
// prints the best GB/s per thread count.
// Usage: membw <max_threads> <passes>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N (256u * 1024u * 1024u) /* floats: 1 GiB */

static float *buf;
typedef struct { size_t lo, hi; float sum; } Part;

static void *work(void *p) {
  Part *part = (Part *)p;
  float s = 0;
  for (size_t i = part->lo; i < part->hi; i++) s += buf[i];
  part->sum = s;
  return NULL;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  int maxT = argc > 1 ? atoi(argv[1]) : 2;
  int passes = argc > 2 ? atoi(argv[2]) : 5;
  buf = aligned_alloc(64, (size_t)N * sizeof(float));
  if (!buf) return 1;
  for (size_t i = 0; i < N; i++) buf[i] = (float)(i & 7);
  float sink = 0;
  for (int T = 1; T <= maxT; T++) {
    double best = 0;
    for (int p = 0; p < passes; p++) {
      pthread_t th[64];
      Part parts[64];
      double t0 = now();
      for (int t = 0; t < T; t++) {
        parts[t].lo = (size_t)N * t / T;
        parts[t].hi = (size_t)N * (t + 1) / T;
        pthread_create(&th[t], NULL, work, &parts[t]);
      }
      for (int t = 0; t < T; t++) {
        pthread_join(th[t], NULL);
        sink += parts[t].sum;
      }
      double gbs = (double)N * sizeof(float) / (now() - t0) / 1e9;
      if (gbs > best) best = gbs;
    }
    printf("%d %.3f\n", T, best);
  }
  fprintf(stderr, "checksum %f\n", sink);
  free(buf);
  return 0;
}
