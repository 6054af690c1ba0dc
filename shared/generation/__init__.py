"""Generating tokens with a trained model, for each kind of task the course trains.

- `shared.generation.seq2seq`: a source in, its answer out (list reversal, notebooks 06 and 09): greedy
  decoding and beam search for both architectures, exact match, `reverse()`, saving and loading a reverser.
- `shared.generation.lm`: continue a prompt (the character GPT, notebook 08): `generate` with temperature,
  top-k, top-p, a repetition penalty and an n-gram ban, with or without the KV cache.
"""
