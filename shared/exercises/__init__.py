"""Exercise checkers for notebooks 01-12, 14 and 15: `check_<name>(your_function) -> bool`, with friendly feedback.

Each checker runs your function on seeded random and edge-case inputs (tiny sizes, T=1, fully masked rows,
ties, p=1.0, k=1, ...), compares it with the course's reference and prints which case differs and why, with
a hint for the usual mistakes. It returns True or False and never raises for a wrong answer; a function that
still raises NotImplementedError is reported as "not solved yet".

    from shared.exercises import check_attention
    check_attention(my_attention)
"""

from .attention import (  # 01, 02
    check_attention,
    check_merge_heads,
    check_multi_head_attention,
    check_scaled_scores,
    check_softmax_temperature,
    check_split_heads,
    reference_multi_head_attention,
)
from .block import (  # 05
    check_encoder_layer_params,
    check_layer_norm,
    check_pre_ln_block,
    check_sublayer_connection,
)
from .capstone import check_addition_model, greedy_answers  # 12
from .distributed import check_average_gradients, check_shard_for_rank  # 11
from .fast_attention import check_online_softmax_step, check_tiled_forward  # 15
from .generation import (  # 06, 08
    check_decoder_inputs,
    check_exact_match,
    check_greedy_step,
    check_kv_cache_step,
    check_sample_next_token,
    check_top_k,
    check_top_p,
)
from .gpt import check_gpt  # 08
from .masks_and_positions import (  # 03, 04
    check_causal_mask,
    check_learned_positions,
    check_padding_mask,
    check_sinusoidal_table,
)
from .modern import check_newton_schulz, check_repeat_kv, check_rms_norm, check_swiglu  # 10
from .position_schemes import check_alibi_slopes, check_randomized_positions, check_rope_one_head  # 09
from .pretrained import check_chatml_prompt, check_dequantize_q4_1, check_unpermute_qk  # 14
from .tokenization import check_bpe_encode, check_merge  # 13
from .training import check_clip_global_norm, check_noam_lr, check_smoothed_targets, check_training_step  # 07

CHECKERS = {  # notebook -> its checkers, in the order the exercises appear
    "01": [check_scaled_scores, check_softmax_temperature, check_attention],
    "02": [check_split_heads, check_merge_heads, check_multi_head_attention],
    "03": [check_causal_mask, check_padding_mask, check_attention],  # here with fully_masked_rows=True
    "04": [check_sinusoidal_table, check_learned_positions],
    "05": [check_layer_norm, check_sublayer_connection, check_encoder_layer_params, check_pre_ln_block],
    "06": [check_decoder_inputs, check_greedy_step, check_exact_match],
    "07": [check_noam_lr, check_clip_global_norm, check_smoothed_targets, check_training_step],
    "08": [check_top_k, check_top_p, check_sample_next_token, check_kv_cache_step, check_gpt],
    "09": [check_rope_one_head, check_alibi_slopes, check_randomized_positions],
    "10": [check_rms_norm, check_swiglu, check_repeat_kv, check_newton_schulz],
    "11": [check_shard_for_rank, check_average_gradients],
    "12": [check_addition_model],  # takes a trained model, not a function
    "13": [check_merge, check_bpe_encode],
    "14": [check_dequantize_q4_1, check_unpermute_qk, check_chatml_prompt],
    "15": [check_online_softmax_step, check_tiled_forward],
}

__all__ = [name for name in dir() if name.startswith("check_")] + ["CHECKERS", "greedy_answers",
                                                                     "reference_multi_head_attention"]
