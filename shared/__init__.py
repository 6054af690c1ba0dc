"""The finished, tested code of the course "Transformers from scratch"; the notebooks import it.

Read it layer by layer; each layer imports only the ones above it (tests/test_imports.py checks this):

- the model: `masks`, `positions`, `norms`, `kv_cache`, `attention` (fused), `explicit_attention` (per head),
  `layers`, `transformer` (encoder-decoder), `gpt` (decoder-only);
- the tasks: `reversal` (list reversal), `lengthgen` (length generalisation), `shakespeare` (characters);
- training: `history`, `training`, `checkpoint`, `distributed`;
- generation: `generation.seq2seq` (a source in, its answer out) and `generation.lm` (continue a prompt);
- tools: `runtime`, `files`, `validation`, `plotting`, `debug`;
- the teaching layer, which nothing else imports: `exercises` (checkers and their feedback) and `explorers`
  (interactive widgets).
"""

__version__ = "0.1.0"
