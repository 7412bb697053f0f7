"""The PP inference contract's fields, tensors and actions, as spec/contract.def
defines them (ppv's one definition). Generated from that file; tests/python/
test_record.py fails when the two differ."""

ENVELOPE_FIELDS = (
    ('pp_envelope_version', 'int'),
    ('action', 'int'),
    ('call_id', 'int'),
    ('chunk_index', 'int'),
    ('cache_epoch', 'int'),
    ('height', 'int'),
    ('width', 'int'),
    ('current_start_frame', 'int'),
    ('do_kv_recompute', 'bool'),
    ('num_denoise_steps', 'int'),
    ('expected_generator_calls', 'int'),
    ('init_cache', 'bool'),
    ('reset_kv_cache', 'bool'),
    ('reset_crossattn_cache', 'bool'),
    ('base_seed', 'int'),
    ('kv_cache_attention_bias', 'float'),
    ('noise_scale', 'float'),
    ('pp_disable_vace', 'bool'),
    ('envelope_digest_i64', 'int'),
)

# Fields a message may leave out (read as 0): spec/contract.def's OPTIONAL.
OPTIONAL_FIELDS = (
    'envelope_digest_i64',
)

RESULT_FIELDS = (
    ('pp_result_version', 'int'),
    ('call_id', 'int'),
    ('chunk_index', 'int'),
    ('cache_epoch', 'int'),
    ('observed_generator_calls', 'int'),
    ('mesh_current_start_frame', 'int'),
    ('output_digest_i64', 'int'),
    ('ok', 'bool'),
    ('error_message', 'str'),
    ('tB_ms', 'float'),
    ('t_mesh_idle_ms', 'float'),
)

ENVELOPE_TENSORS = (
    ('conditioning_embeds', 'bf16', 3),
    ('latents_in', 'bf16', 5),
    ('current_denoising_step_list', 'i64', 1),
    ('context_frames', 'bf16', 5),
)

RESULT_TENSORS = (
    ('latents_out', 'bf16', 5),
)

ACTIONS = {
    'NOOP': 0,
    'INFER': 1,
    'SHUTDOWN': 2,
    'ERROR': 3,
}
