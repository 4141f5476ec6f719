// In-process timing of llama2.c's run.c (../shared/anchors/llama2c, MIT): its own generate()
// called in a loop, stdout to /dev/null, as ../shared/anchors/README.md describes.
// Usage: llama2c-bench <model.bin> <tokenizer.bin> <prompt> <steps> <reps>
// Prints one line per rep: "<microseconds> <tokens>" where tokens counts the sampled tokens
// (forward passes after the prompt), the same count flowgrpo's side reports.
#define main run_main
#include "run.c"
#undef main

static long long now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000LL + t.tv_nsec / 1000;
}

// generate()'s loop without printing, to count the tokens one call samples.
static int count_sampled(Transformer *tr, Tokenizer *tok, Sampler *sm, char *prompt, int steps) {
  int *ids = malloc((strlen(prompt) + 3) * sizeof(int));
  int n = 0;
  encode(tok, prompt, 1, 0, ids, &n);
  int token = ids[0], pos = 0, sampled = 0;
  while (pos < steps) {
    float *logits = forward(tr, token, pos);
    int next = pos < n - 1 ? ids[pos + 1] : sample(sm, logits);
    if (pos >= n - 1) sampled++;
    pos++;
    if (next == 1) break;
    token = next;
  }
  free(ids);
  return sampled;
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: %s model.bin tok.bin prompt steps reps\n", argv[0]);
    return 2;
  }
  Transformer transformer;
  build_transformer(&transformer, argv[1]);
  Tokenizer tokenizer;
  build_tokenizer(&tokenizer, argv[2], transformer.config.vocab_size);
  Sampler sampler;
  build_sampler(&sampler, transformer.config.vocab_size, 0.0f, 0.9f, 1);
  int steps = atoi(argv[4]);
  int reps = atoi(argv[5]);
  int tokens = count_sampled(&transformer, &tokenizer, &sampler, argv[3], steps);
  FILE *out = stdout;
  if (!freopen("/dev/null", "w", stdout)) return 1;
  for (int r = 0; r < reps; r++) {
    long long t0 = now_us();
    generate(&transformer, &tokenizer, &sampler, argv[3], steps);
    long long t1 = now_us();
    fprintf(stderr, "%lld %d\n", t1 - t0, tokens);
  }
  (void)out;
  free_sampler(&sampler);
  free_tokenizer(&tokenizer);
  free_transformer(&transformer);
  return 0;
}
