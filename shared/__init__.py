"""The finished, tested code of the course "Transformers from scratch"; the notebooks import it.

Read it layer by layer; each layer imports only itself and the layers listed before it (tests/test_imports.py
checks this):

- the base: `validation` (argument checks), `runtime` (device, seeds, fast mode), `files`, `history`;
- the model, which imports nothing but the base's `validation`: `masks`, `positions`, `norms`, `kv_cache`,
  `attention` (fused), `explicit_attention` (per head), `layers`, `transformer` (encoder-decoder), `gpt`;
- training: `training` (loss, schedules, the loop), `checkpoint`, `distributed`;
- the tasks: `reversal` (list reversal), `lengthgen` (length generalisation), `shakespeare` (characters),
  `addition` (the capstone of notebook 12);
- generation: `generation.seq2seq` (a source in, its answer out) and `generation.lm` (continue a prompt);
- tools: `plotting`, `architecture` (the map of the whole model), `debug`;
- the teaching layer, which nothing else imports: `exercises` (checkers and their feedback) and `explorers`
  (interactive widgets).
"""

__version__ = "0.1.0"
