// Token-by-token streaming out of the generators: a request may name a listener that hears each
// token as it is sampled — the step-by-step generator after every decode step, the fused one
// after every chunk of the generate graph (a few tokens each: `chunkTokens`) — and a signal
// that ends it early. What a request samples does not change with either.

/** Hears one sampled token and its log-probability, in order, before the request resolves. */
export type TokenListener = (token: number, logprob: number) => void;
