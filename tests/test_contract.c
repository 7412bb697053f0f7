/* test_contract.c - the PP inference contract (spec/contract.def): every
 * rule an envelope or a result must keep is refused with its failure mode
 * and a message naming the ids, and framing is exact, canonical, refuses
 * before the header and parses back to the same message. */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>

#include "contractutil.h"
#include "engine/pp/pp_internal.h" /* white-box: the tensor blocks */
#include "testutil.h"

/* Checks e against o and expects the failure id and message exactly. */
static void expect(const ppv_envelope *e, const ppv_contract_order *o, const char *id,
                   const char *message) {
    char msg[512] = "";
    ppv_failure f = ppv_envelope_check(e, o, msg, sizeof msg);
    assert_string_equal(ppv_failure_id(f), id);
    assert_string_equal(msg, message);
}

static void test_expected_generator_calls_is_steps_plus_one_when_recomputing(void **state) {
    (void)state;
    assert_int_equal(ppv_expected_generator_calls(0, 4), 4);
    assert_int_equal(ppv_expected_generator_calls(1, 4), 5);
    assert_int_equal(ppv_expected_generator_calls(1, 1), 2);
}

static void test_a_valid_stream_passes_every_rule(void **state) {
    (void)state;
    bufs b;
    ppv_envelope e;
    ppv_contract_order o = ppv_contract_order_start();
    char msg[512];
    /* chunk 0 of epoch 0, chunk 1 recomputing, a NOOP, a hard cut to epoch 1 */
    make_infer(&e, &b, 0, 0, 0, 0, 4);
    assert_int_equal(ppv_envelope_check(&e, &o, msg, sizeof msg), PPV_FAIL_NONE);
    ppv_contract_order_advance(&o, &e);
    make_infer(&e, &b, 1, 1, 0, 1, 4);
    assert_int_equal(ppv_envelope_check(&e, &o, msg, sizeof msg), PPV_FAIL_NONE);
    ppv_contract_order_advance(&o, &e);
    ppv_envelope_init(&e);
    e.action = PPV_PP_NOOP;
    e.call_id = 2;
    e.chunk_index = 1;
    assert_int_equal(ppv_envelope_check(&e, &o, msg, sizeof msg), PPV_FAIL_NONE);
    ppv_contract_order_advance(&o, &e);
    make_infer(&e, &b, 3, 0, 1, 0, 2);
    assert_int_equal(ppv_envelope_check(&e, &o, msg, sizeof msg), PPV_FAIL_NONE);
    ppv_contract_order_advance(&o, &e);
    assert_int_equal(o.call_id, 3);
    assert_int_equal(o.chunk_index, 0);
    assert_int_equal(o.cache_epoch, 1);
}

static void test_call_count_drift_is_fm02(void **state) {
    (void)state;
    bufs b;
    ppv_envelope e;
    ppv_contract_order o = {4, 1, 0};
    make_infer(&e, &b, 5, 2, 0, 1, 4);
    e.expected_generator_calls = 4; /* recompute forgotten: one call short */
    expect(&e, &o, "FM-02",
           "expected_generator_calls 4, but do_kv_recompute 1 + num_denoise_steps 4 make 5 "
           "(call_id 5, chunk_index 2, cache_epoch 0)");
    make_infer(&e, &b, 5, 2, 0, 0, 4);
    e.current_denoising_step_list.dims[0] = 3;
    expect(&e, &o, "FM-02",
           "current_denoising_step_list has 3 steps, num_denoise_steps says 4 (call_id 5, "
           "chunk_index 2, cache_epoch 0)");
}

static void test_context_frames_present_iff_recompute(void **state) {
    (void)state;
    bufs b;
    ppv_envelope e;
    ppv_contract_order o = {4, 1, 0};
    make_infer(&e, &b, 5, 2, 0, 1, 4);
    e.context_frames.data = NULL;
    expect(&e, &o, "FM-06",
           "context_frames missing (call_id 5, chunk_index 2, cache_epoch 0): do_kv_recompute "
           "needs the context frames");
    make_infer(&e, &b, 5, 2, 0, 0, 4);
    set_tensor(&e.context_frames, PPV_DTYPE_BF16, b.ctx, 5, (int64_t[]){1, 2, 16, 8, 8});
    expect(&e, &o, "FM-15",
           "context_frames present in INFER envelope (call_id 5, chunk_index 2, cache_epoch 0): "
           "do_kv_recompute is 0, so it must be absent");
    make_infer(&e, &b, 5, 2, 0, 0, 4);
    e.conditioning_embeds.data = NULL;
    expect(&e, &o, "FM-06",
           "conditioning_embeds missing (call_id 5, chunk_index 2, cache_epoch 0)");
}

static void test_tensor_dtype_and_shape_are_fm07(void **state) {
    (void)state;
    bufs b;
    ppv_envelope e;
    ppv_contract_order o = {4, 1, 0};
    make_infer(&e, &b, 5, 2, 0, 0, 4);
    e.latents_in.dtype = PPV_DTYPE_F32;
    expect(&e, &o, "FM-07",
           "latents_in has dtype f32, the contract says bf16 (call_id 5, chunk_index 2, "
           "cache_epoch 0)");
    make_infer(&e, &b, 5, 2, 0, 0, 4);
    e.latents_in.dims[3] = 4;
    expect(&e, &o, "FM-07",
           "latents_in is (1, 3, 16, 4, 8), the contract says (1, 3, 16, 8, 8) for 64x64 "
           "(call_id 5, chunk_index 2, cache_epoch 0)");
}

static void test_ids_must_keep_their_order(void **state) {
    (void)state;
    bufs b;
    ppv_envelope e;
    ppv_contract_order o = {4, 1, 0};
    make_infer(&e, &b, 4, 2, 0, 0, 4);
    expect(&e, &o, "PPV-ORDER",
           "call_id 4 after 4: call_id must strictly increase over every action (call_id 4, "
           "chunk_index 2, cache_epoch 0)");
    make_infer(&e, &b, 5, 1, 0, 0, 4);
    expect(&e, &o, "PPV-ORDER",
           "chunk_index 1 after 1 in the same epoch: chunk_index must increase (it may restart "
           "only with a new cache_epoch) (call_id 5, chunk_index 1, cache_epoch 0)");
    /* back to 0 in the same epoch, as a stream that restarts without a hard cut */
    make_infer(&e, &b, 5, 0, 0, 0, 4);
    expect(&e, &o, "PPV-ORDER",
           "chunk_index 0 after 1 in the same epoch: chunk_index must increase (it may restart "
           "only with a new cache_epoch) (call_id 5, chunk_index 0, cache_epoch 0)");
    make_infer(&e, &b, 3, 2, 0, 0, 4);
    expect(&e, &o, "PPV-ORDER",
           "call_id 3 after 4: call_id must strictly increase over every action (call_id 3, "
           "chunk_index 2, cache_epoch 0)");
    o.cache_epoch = 2;
    make_infer(&e, &b, 5, 2, 1, 0, 4);
    expect(&e, &o, "PPV-ORDER",
           "cache_epoch 1 after 2: the epoch never goes back (call_id 5, chunk_index 2, "
           "cache_epoch 1)");
}

static void test_epoch_rules_for_the_first_chunk(void **state) {
    (void)state;
    bufs b;
    ppv_envelope e;
    ppv_contract_order o = {4, 1, 0};
    /* a hard cut: epoch 1 restarts chunk_index, and must init the cache */
    make_infer(&e, &b, 5, 0, 1, 0, 4);
    e.init_cache = 0;
    expect(&e, &o, "PPV-RULE",
           "the first chunk of an epoch must set init_cache (call_id 5, chunk_index 0, "
           "cache_epoch 1)");
    make_infer(&e, &b, 5, 0, 1, 1, 4);
    e.init_cache = 1;
    expect(&e, &o, "PPV-RULE",
           "do_kv_recompute on the first chunk of an epoch: there is no context yet (call_id 5, "
           "chunk_index 0, cache_epoch 1)");
}

static void test_fields_out_of_range_are_refused(void **state) {
    (void)state;
    bufs b;
    ppv_envelope e;
    ppv_contract_order o = {4, 1, 0};
    make_infer(&e, &b, 5, 2, 0, 0, 4);
    e.pp_envelope_version = 2;
    expect(&e, &o, "PPV-VERSION",
           "pp_envelope_version 2: this ppv reads version 1 (call_id 5, chunk_index 2, "
           "cache_epoch 0)");
    make_infer(&e, &b, 5, 2, 0, 0, 4);
    e.action = 7;
    expect(&e, &o, "PPV-FIELD",
           "action 7 is not a PPAction (call_id 5, chunk_index 2, cache_epoch 0)");
    make_infer(&e, &b, 5, 2, 0, 0, 4);
    e.reset_kv_cache = 2;
    expect(&e, &o, "PPV-FIELD",
           "reset_kv_cache is 2, not a boolean (call_id 5, chunk_index 2, cache_epoch 0)");
    make_infer(&e, &b, 5, 2, 0, 0, 4);
    e.pp_disable_vace = 0;
    expect(&e, &o, "PPV-RULE",
           "pp_disable_vace must be 1: VACE does not run in the pipeline (call_id 5, "
           "chunk_index 2, cache_epoch 0)");
    make_infer(&e, &b, 5, 2, 0, 0, 4);
    e.width = 72;
    expect(&e, &o, "PPV-RULE",
           "height 64 and width 72 must be positive multiples of 16 (call_id 5, chunk_index 2, "
           "cache_epoch 0)");
    ppv_envelope_init(&e);
    e.action = PPV_PP_SHUTDOWN;
    e.call_id = 9;
    set_tensor(&e.latents_in, PPV_DTYPE_BF16, b.lat, 5, (int64_t[]){1, 3, 16, 8, 8});
    expect(&e, &o, "PPV-RULE",
           "latents_in present in SHUTDOWN envelope (call_id 9, chunk_index 0, cache_epoch 0)");
}

/* Copies every framed tensor into the receiver's tensors, in spec order. */
static void deliver(const ppv_frame *f, ppv_tensor **order, int n) {
    assert_int_equal(n, f->ntensors);
    for (int k = 0; k < n; k++) {
        assert_int_equal(ppv_tensor_bytes(order[k]), ppv_tensor_bytes(f->tensors[k]));
        memcpy(order[k]->data, f->tensors[k]->data, ppv_tensor_bytes(f->tensors[k]));
    }
}

static void test_framing_is_canonical_and_round_trips(void **state) {
    (void)state;
    bufs b;
    ppv_envelope e, got;
    ppv_contract_order o = {4, 1, 0};
    make_infer(&e, &b, 5, 2, 0, 1, 3);
    ppv_frame f;
    char msg[512];
    assert_int_equal(ppv_envelope_frame(&e, &o, &f, msg, sizeof msg), PPV_FAIL_NONE);
    const char *want_meta =
        "action=1\nbase_seed=42\ncache_epoch=0\ncall_id=5\nchunk_index=2\ncurrent_start_frame=6\n"
        "do_kv_recompute=1\nexpected_generator_calls=4\nheight=64\ninit_cache=0\n"
        "kv_cache_attention_bias=0.29999999999999999\nnoise_scale=0.75\nnum_denoise_steps=3\n"
        "pp_disable_vace=1\npp_envelope_version=1\nreset_crossattn_cache=0\nreset_kv_cache=0\n"
        "tensor.conditioning_embeds=bf16 1 4 8\ntensor.context_frames=bf16 1 2 16 8 8\n"
        "tensor.current_denoising_step_list=i64 3\ntensor.latents_in=bf16 1 3 16 8 8\n"
        "width=64\n";
    assert_string_equal(f.meta, want_meta);
    int64_t want_header[PPV_FRAME_HEADER] = {1, 5, 2, 0, 4, 1, (int64_t)strlen(want_meta)};
    assert_memory_equal(f.header, want_header, sizeof want_header);
    /* spec order is key order */
    assert_ptr_equal(f.tensors[0], &e.conditioning_embeds);
    assert_ptr_equal(f.tensors[1], &e.context_frames);
    assert_ptr_equal(f.tensors[2], &e.current_denoising_step_list);
    assert_ptr_equal(f.tensors[3], &e.latents_in);
    ppv_tensor *order[PPV_FRAME_MAX_TENSORS];
    int n = 0;
    assert_int_equal(ppv_envelope_unframe(f.header, f.meta, &got, order, &n, msg, sizeof msg),
                     PPV_FAIL_NONE);
    deliver(&f, order, n);
    /* every field and every tensor came through */
    ppv_envelope a = e, c = got;
    ppv_tensor *ta[] = {&a.conditioning_embeds, &a.latents_in, &a.current_denoising_step_list,
                        &a.context_frames};
    ppv_tensor *tc[] = {&c.conditioning_embeds, &c.latents_in, &c.current_denoising_step_list,
                        &c.context_frames};
    for (int k = 0; k < 4; k++) {
        assert_int_equal(ppv_tensor_bytes(ta[k]), ppv_tensor_bytes(tc[k]));
        assert_memory_equal(ta[k]->data, tc[k]->data, ppv_tensor_bytes(ta[k]));
        ta[k]->data = tc[k]->data = NULL;
    }
    assert_memory_equal(&a, &c, sizeof a);
    assert_int_equal(ppv_envelope_check(&got, &o, msg, sizeof msg), PPV_FAIL_NONE);
    ppv_envelope_free_tensors(&got);
    ppv_frame_free(&f);
    /* NOOP is its header alone */
    ppv_envelope_init(&e);
    e.action = PPV_PP_NOOP;
    e.call_id = 6;
    e.chunk_index = 2;
    assert_int_equal(ppv_envelope_frame(&e, &o, &f, msg, sizeof msg), PPV_FAIL_NONE);
    int64_t noop[PPV_FRAME_HEADER] = {0, 6, 2, 0, 0, 1, 0};
    assert_memory_equal(f.header, noop, sizeof noop);
    assert_null(f.meta);
    ppv_frame_free(&f);
}

static void test_framing_refuses_before_the_header(void **state) {
    (void)state;
    bufs b;
    ppv_envelope e;
    ppv_contract_order o = {4, 1, 0};
    make_infer(&e, &b, 5, 2, 0, 0, 4);
    e.current_denoising_step_list.dtype = PPV_DTYPE_U8; /* OM-02: unsupported dtype */
    ppv_frame f;
    char msg[512];
    assert_int_equal(ppv_envelope_frame(&e, &o, &f, msg, sizeof msg), PPV_FAIL_FM07);
    int64_t zero[PPV_FRAME_HEADER] = {0};
    assert_memory_equal(f.header, zero, sizeof zero); /* nothing to send */
    assert_null(f.meta);
    /* OM-03: an inconsistent plan is caught before the header too */
    make_infer(&e, &b, 5, 2, 0, 0, 4);
    e.expected_generator_calls = 5;
    assert_int_equal(ppv_envelope_frame(&e, &o, &f, msg, sizeof msg), PPV_FAIL_FM02);
    assert_memory_equal(f.header, zero, sizeof zero);
    assert_null(f.meta);
    /* OM-01: a result whose metadata cannot be serialised */
    ppv_result r;
    ppv_result_init(&r, &e);
    r.ok = 0;
    snprintf(r.error_message, sizeof r.error_message, "line one\nline two");
    assert_int_equal(ppv_result_frame(&r, &f, msg, sizeof msg), PPV_FAIL_FM04);
    assert_string_equal(msg, "error_message cannot be serialised: it holds a newline");
    assert_memory_equal(f.header, zero, sizeof zero);
    assert_null(f.meta);
}

/* Unframes (header, meta) and expects the failure id and message. */
static void expect_unframe(const int64_t *header, const char *meta, const char *id,
                           const char *message) {
    ppv_envelope e;
    ppv_tensor *order[PPV_FRAME_MAX_TENSORS];
    int n = 0;
    char msg[512] = "";
    ppv_failure f = ppv_envelope_unframe(header, meta, &e, order, &n, msg, sizeof msg);
    assert_string_equal(ppv_failure_id(f), id);
    assert_string_equal(msg, message);
    assert_int_equal(n, 0);
    assert_null(e.latents_in.data); /* nothing left allocated */
}

/* f's metadata with the first line starting with `key=` replaced by repl
 * (removed when repl is ""), into buf; the header's byte count follows. */
static void edit_meta(const ppv_frame *f, const char *key, const char *repl, char *buf,
                      int64_t *header) {
    const char *p = strstr(f->meta, key);
    assert_non_null(p);
    const char *nl = strchr(p, '\n') + 1;
    snprintf(buf, 4096, "%.*s%s%s", (int)(p - f->meta), f->meta, repl, nl);
    memcpy(header, f->header, PPV_FRAME_HEADER * sizeof *header);
    header[6] = (int64_t)strlen(buf);
}

static void test_unframing_refuses_what_the_contract_does_not_know(void **state) {
    (void)state;
    bufs b;
    ppv_envelope e;
    ppv_contract_order o = {4, 1, 0};
    make_infer(&e, &b, 5, 2, 0, 0, 4);
    ppv_frame f;
    char msg[512], buf[4096];
    int64_t h[PPV_FRAME_HEADER];
    assert_int_equal(ppv_envelope_frame(&e, &o, &f, msg, sizeof msg), PPV_FAIL_NONE);
    const char *ids = "(call_id 5, chunk_index 2, cache_epoch 0)";
    char want[600];
    /* a field this ppv does not know (a newer sender's) is filtered and
     * counted, never a crash; the video key is forbidden */
    edit_meta(&f, "noise_scale=", "noise_scale=0.75\nnot_a_field=1\nnot_another=2\n", buf, h);
    {
        ppv_envelope got;
        ppv_tensor *order[PPV_FRAME_MAX_TENSORS];
        int n = 0;
        assert_int_equal(ppv_envelope_unframe(h, buf, &got, order, &n, msg, sizeof msg),
                         PPV_FAIL_NONE);
        assert_int_equal(got.unknown_fields, 2);
        assert_string_equal(got.unknown_field, "not_a_field");
        assert_true(got.noise_scale == 0.75);
        assert_int_equal(n, 3);
        ppv_envelope_free_tensors(&got);
    }
    edit_meta(&f, "noise_scale=", "noise_scale=0.75\nvideo=1\n", buf, h);
    expect_unframe(h, buf, "PPV-FIELD", "the video key is forbidden in the envelope "
                                        "(call_id 5, chunk_index 2, cache_epoch 0)");
    edit_meta(&f, "base_seed=", "", buf, h);
    snprintf(want, sizeof want, "field base_seed is missing from the envelope %s", ids);
    expect_unframe(h, buf, "PPV-FIELD", want);
    edit_meta(&f, "action=", "action=0\n", buf, h);
    snprintf(want, sizeof want, "header says action 1, metadata 0 %s", ids);
    expect_unframe(h, buf, "PPV-FIELD", want);
    edit_meta(&f, "call_id=", "call_id=6\n", buf, h);
    snprintf(want, sizeof want, "header says call_id 5, metadata 6 %s", ids);
    expect_unframe(h, buf, "PPV-FIELD", want);
    edit_meta(&f, "tensor.latents_in=", "tensor.latents_in=f32 1 3 16 8 8\n", buf, h);
    snprintf(want, sizeof want, "tensor latents_in: dtype f32, the contract says bf16 %s", ids);
    expect_unframe(h, buf, "FM-07", want);
    edit_meta(&f, "width=", "", buf, h);
    strcat(buf, "aaa=1\n");
    h[6] = (int64_t)strlen(buf);
    snprintf(want, sizeof want, "metadata key 'aaa' out of order or repeated %s", ids);
    expect_unframe(h, buf, "PPV-FIELD", want);
    edit_meta(&f, "height=", "height=64\nheight=64\n", buf, h);
    snprintf(want, sizeof want, "metadata key 'height' out of order or repeated %s", ids);
    expect_unframe(h, buf, "PPV-FIELD", want);
    memcpy(h, f.header, sizeof h);
    h[5] = 2;
    snprintf(want, sizeof want, "envelope version 2: this ppv reads version 1 %s", ids);
    expect_unframe(h, f.meta, "PPV-VERSION", want);
    memcpy(h, f.header, sizeof h);
    h[4] = 2;
    snprintf(want, sizeof want, "header announces 2 tensors, the specs list 3 %s", ids);
    expect_unframe(h, f.meta, "PPV-FIELD", want);
    int64_t noop[PPV_FRAME_HEADER] = {PPV_PP_NOOP, 6, 2, 0, 0, 1, 12};
    expect_unframe(noop, NULL, "PPV-FIELD",
                   "a NOOP header announces a payload (call_id 6, chunk_index 2, cache_epoch 0)");
    ppv_frame_free(&f);
}

static void test_stage0_accepts_drops_or_rejects_results(void **state) {
    (void)state;
    bufs b;
    ppv_envelope e;
    make_infer(&e, &b, 5, 2, 1, 0, 4);
    ppv_result r;
    ppv_result_init(&r, &e);
    r.observed_generator_calls = 4;
    uint16_t out[sizeof b.lat / 2] = {0};
    set_tensor(&r.latents_out, PPV_DTYPE_BF16, out, 5, (int64_t[]){1, 3, 16, 8, 8});
    ppv_failure mode;
    char msg[512];
    assert_int_equal(ppv_result_check(&r, &e, 1, 4, &mode, msg, sizeof msg), PPV_RESULT_ACCEPT);
    /* a result of an earlier epoch: dropped, never decoded (OM-09) */
    assert_int_equal(ppv_result_check(&r, &e, 2, 4, &mode, msg, sizeof msg), PPV_RESULT_DROP_STALE);
    assert_string_equal(msg, "result of cache_epoch 1 while the epoch is 2: dropped, never decoded "
                             "(call_id 5, chunk_index 2, cache_epoch 1)");
    /* the same call twice: the second is dropped */
    assert_int_equal(ppv_result_check(&r, &e, 1, 5, &mode, msg, sizeof msg),
                     PPV_RESULT_DROP_DUPLICATE);
    r.observed_generator_calls = 5;
    assert_int_equal(ppv_result_check(&r, &e, 1, 4, &mode, msg, sizeof msg), PPV_RESULT_REJECT);
    assert_string_equal(ppv_failure_id(mode), "FM-02");
    assert_string_equal(msg, "observed_generator_calls 5, expected_generator_calls 4 (call_id 5, "
                             "chunk_index 2, cache_epoch 1)");
    r.observed_generator_calls = 4;
    r.latents_out.dims[1] = 2;
    assert_int_equal(ppv_result_check(&r, &e, 1, 4, &mode, msg, sizeof msg), PPV_RESULT_REJECT);
    assert_string_equal(ppv_failure_id(mode), "FM-07");
    /* a failed result: no tensor, a reason */
    ppv_result_init(&r, &e);
    r.ok = 0;
    snprintf(r.error_message, sizeof r.error_message, "FM-22: allreduce on group world");
    assert_int_equal(ppv_result_check(&r, &e, 1, 4, &mode, msg, sizeof msg), PPV_RESULT_ACCEPT);
    r.latents_out.data = out;
    assert_int_equal(ppv_result_check(&r, &e, 1, 4, &mode, msg, sizeof msg), PPV_RESULT_REJECT);
    assert_string_equal(ppv_failure_id(mode), "PPV-RULE");
}

static void test_results_round_trip_with_and_without_latents(void **state) {
    (void)state;
    bufs b;
    ppv_envelope e;
    make_infer(&e, &b, 5, 2, 1, 0, 4);
    ppv_result r, got;
    ppv_result_init(&r, &e);
    r.observed_generator_calls = 4;
    r.mesh_current_start_frame = 9;
    r.output_digest_i64 = -1234567890123LL;
    r.tB_ms = 1.5;
    uint16_t out[sizeof b.lat / 2];
    for (size_t k = 0; k < sizeof out / 2; k++)
        out[k] = (uint16_t)(k * 7);
    set_tensor(&r.latents_out, PPV_DTYPE_BF16, out, 5, (int64_t[]){1, 3, 16, 8, 8});
    ppv_frame f;
    char msg[512];
    ppv_tensor *order[PPV_FRAME_MAX_TENSORS];
    int n;
    assert_int_equal(ppv_result_frame(&r, &f, msg, sizeof msg), PPV_FAIL_NONE);
    assert_int_equal(ppv_result_unframe(f.header, f.meta, &got, order, &n, msg, sizeof msg),
                     PPV_FAIL_NONE);
    deliver(&f, order, n);
    assert_memory_equal(got.latents_out.data, out, sizeof out);
    ppv_result a = r, c = got;
    a.latents_out.data = c.latents_out.data = NULL;
    assert_memory_equal(&a, &c, sizeof a);
    ppv_result_free_tensors(&got);
    ppv_frame_free(&f);
    /* an error result: no output_digest_i64, no tensor, the message intact */
    ppv_result_init(&r, &e);
    r.ok = 0;
    snprintf(r.error_message, sizeof r.error_message, "FM-23: leader rejected call_id 5");
    assert_int_equal(ppv_result_frame(&r, &f, msg, sizeof msg), PPV_FAIL_NONE);
    assert_null(strstr(f.meta, "output_digest_i64"));
    assert_int_equal(f.header[4], 0);
    assert_int_equal(ppv_result_unframe(f.header, f.meta, &got, order, &n, msg, sizeof msg),
                     PPV_FAIL_NONE);
    assert_int_equal(n, 0);
    assert_string_equal(got.error_message, "FM-23: leader rejected call_id 5");
    assert_int_equal(got.ok, 0);
    ppv_frame_free(&f);
}

/* Integers as the metadata carries them: plain decimals, and what strtoll
 * also accepts (a '+', leading zeros, 19 digits); nothing else. */
static void test_metadata_integers_are_read_as_strtoll_reads_them(void **state) {
    (void)state;
    bufs b;
    ppv_envelope e, got;
    ppv_contract_order o = {4, 1, 0};
    make_infer(&e, &b, 5, 2, 0, 0, 4);
    ppv_frame f;
    char msg[512], buf[4096];
    int64_t h[PPV_FRAME_HEADER];
    assert_int_equal(ppv_envelope_frame(&e, &o, &f, msg, sizeof msg), PPV_FAIL_NONE);
    static const struct {
        const char *text;
        int64_t value;
    } good[] = {{"0", 0},
                {"-0", 0},
                {"+17", 17},
                {" 17", 17},
                {"0017", 17},
                {"-42", -42},
                {"999999999999999999", 999999999999999999LL},
                {"9223372036854775807", INT64_MAX},
                {"-9223372036854775808", INT64_MIN}};
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
        char line[64];
        snprintf(line, sizeof line, "base_seed=%s\n", good[k].text);
        edit_meta(&f, "base_seed=", line, buf, h);
        ppv_tensor *order[PPV_FRAME_MAX_TENSORS];
        int n = 0;
        if (ppv_envelope_unframe(h, buf, &got, order, &n, msg, sizeof msg) != PPV_FAIL_NONE)
            fail_msg("base_seed=%s: %s", good[k].text, msg);
        assert_int_equal(got.base_seed, good[k].value);
        ppv_envelope_free_tensors(&got);
    }
    const char *ids = "(call_id 5, chunk_index 2, cache_epoch 0)";
    static const char *const bad[] = {"9223372036854775808", "12a", "", "-", "1 2", "0x10"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char line[64], want[256];
        snprintf(line, sizeof line, "base_seed=%s\n", bad[k]);
        edit_meta(&f, "base_seed=", line, buf, h);
        snprintf(want, sizeof want, "base_seed='%s' is not an integer %s", bad[k], ids);
        expect_unframe(h, buf, "PPV-FIELD", want);
    }
    /* a boolean is 0 or 1, however it is written */
    edit_meta(&f, "init_cache=", "init_cache=2\n", buf, h);
    char want[256];
    snprintf(want, sizeof want, "init_cache='2' is not 0 or 1 %s", ids);
    expect_unframe(h, buf, "PPV-FIELD", want);
    /* a shape's dimensions likewise */
    edit_meta(&f, "tensor.latents_in=", "tensor.latents_in=bf16 1 3 16 +8 008\n", buf, h);
    ppv_tensor *order[PPV_FRAME_MAX_TENSORS];
    int n = 0;
    assert_int_equal(ppv_envelope_unframe(h, buf, &got, order, &n, msg, sizeof msg), PPV_FAIL_NONE);
    int64_t dims[5] = {1, 3, 16, 8, 8};
    assert_memory_equal(got.latents_in.dims, dims, sizeof dims);
    ppv_envelope_free_tensors(&got);
    edit_meta(&f, "tensor.latents_in=", "tensor.latents_in=bf16 1 3 16 8 8x\n", buf, h);
    snprintf(want, sizeof want, "tensor latents_in: bad shape ' 1 3 16 8 8x' %s", ids);
    expect_unframe(h, buf, "PPV-FIELD", want);
    ppv_frame_free(&f);
}

/* Floats are written as "%.17g" writes them and read back to the same
 * bits, also when the same values come again (the writer and the reader
 * keep the texts of recent values) and when values alternate. */
/* A result's measured times (a new value every chunk, written without
 * printf, read without strtod) come out as "%.17g" writes them and are
 * read back to the bit: whole milliseconds over a thousand, random bit
 * patterns from 1e-4 to 1e16, and the values either side of every power
 * of ten and of a tie at the 17th digit. */
static void test_measured_times_are_written_as_printf_writes_them_and_read_back(void **state) {
    (void)state;
    bufs b;
    ppv_envelope e;
    make_infer(&e, &b, 5, 2, 1, 0, 4);
    ppv_result r;
    ppv_result_init(&r, &e);
    r.output_digest_i64 = 1;
    uint16_t out[sizeof b.lat / 2] = {0};
    set_tensor(&r.latents_out, PPV_DTYPE_BF16, out, 5, (int64_t[]){1, 3, 16, 8, 8});
    int64_t n = RUNNING_ON_VALGRIND ? 4000 : 200000;
    uint64_t z = 0x9E3779B97F4A7C15ULL;
    int64_t checked = 0;
    for (int64_t k = 0; k < n; k++) {
        double v;
        switch (k % 4) {
        case 0: /* a virtual clock's milliseconds */
            v = (double)(k / 4 + 1) / 1000.0;
            break;
        case 1: { /* any double from about 1e-4 to 1e16 */
            z = z * 6364136223846793005ULL + 1442695040888963407ULL;
            uint64_t bits = (z >> 12) | ((uint64_t)(1010 + (z >> 58) % 44) << 52);
            memcpy(&v, &bits, sizeof v);
            break;
        }
        case 2: { /* either side of a power of ten */
            double p = pow(10.0, (double)((k / 4) % 20) - 4);
            v = (k / 80) % 2 ? nextafter(p, 0) : nextafter(p, 1e300);
            break;
        }
        default: /* a decimal that is a tie or near one at the 17th digit */
            v = (double)(k / 4) * 0.5e-3 + 0.000000000000000005 * (double)(k % 3);
            break;
        }
        if (k % 8 == 7) v = -v;
        r.tB_ms = v;
        r.t_mesh_idle_ms = v * 3;
        ppv_frame f;
        char msg[512];
        assert_int_equal(ppv_result_frame(&r, &f, msg, sizeof msg), PPV_FAIL_NONE);
        char want[80];
        snprintf(want, sizeof want, "\ntB_ms=%.17g\n", v);
        if (!strstr(f.meta, want)) fail_msg("%a (%.17g) is not written as printf does", v, v);
        snprintf(want, sizeof want, "\nt_mesh_idle_ms=%.17g\n", v * 3);
        assert_non_null(strstr(f.meta, want));
        /* and read back to the bit (as strtod reads the text) */
        ppv_result got;
        ppv_tensor *order[PPV_FRAME_MAX_TENSORS];
        int no = 0;
        if (ppv_result_unframe(f.header, f.meta, &got, order, &no, msg, sizeof msg) !=
            PPV_FAIL_NONE)
            fail_msg("%.17g: %s", v, msg);
        double w = v * 3;
        if (memcmp(&got.tB_ms, &v, sizeof v) || memcmp(&got.t_mesh_idle_ms, &w, sizeof w))
            fail_msg("%.17g and %.17g are read back as %.17g and %.17g", v, w, got.tB_ms,
                     got.t_mesh_idle_ms);
        ppv_result_free_tensors(&got);
        ppv_frame_free(&f);
        checked++;
    }
    assert_int_equal(checked, n);
}

static void test_metadata_floats_round_trip_to_the_bit(void **state) {
    (void)state;
    static const double values[] = {0.3,
                                    0.1,
                                    1.0,
                                    -2.5,
                                    1e15,
                                    123456789012345.0,
                                    1e-300,
                                    0.30000000000000004,
                                    -0.0,
                                    5e-324,
                                    1.7976931348623157e308,
                                    2.0 / 3,
                                    1e16,
                                    -1e-5};
    bufs b;
    ppv_envelope e, got;
    ppv_contract_order o = {4, 1, 0};
    char msg[512];
    for (int pass = 0; pass < 3; pass++)
        for (size_t k = 0; k < sizeof values / sizeof values[0]; k++) {
            double v = values[pass == 1 ? sizeof values / sizeof values[0] - 1 - k : k];
            make_infer(&e, &b, 5, 2, 0, 0, 4);
            e.kv_cache_attention_bias = v;
            e.noise_scale = values[(k + 3) % (sizeof values / sizeof values[0])];
            ppv_frame f;
            assert_int_equal(ppv_envelope_frame(&e, &o, &f, msg, sizeof msg), PPV_FAIL_NONE);
            char want[64];
            snprintf(want, sizeof want, "\nkv_cache_attention_bias=%.17g\n", v);
            if (!strstr(f.meta, want)) fail_msg("%.17g is not written as %s", v, want + 1);
            snprintf(want, sizeof want, "\nnoise_scale=%.17g\n", e.noise_scale);
            assert_non_null(strstr(f.meta, want));
            ppv_tensor *order[PPV_FRAME_MAX_TENSORS];
            int n = 0;
            assert_int_equal(
                ppv_envelope_unframe(f.header, f.meta, &got, order, &n, msg, sizeof msg),
                PPV_FAIL_NONE);
            assert_memory_equal(&got.kv_cache_attention_bias, &v, sizeof v);
            assert_memory_equal(&got.noise_scale, &e.noise_scale, sizeof v);
            ppv_envelope_free_tensors(&got);
            ppv_frame_free(&f);
        }
}

/* ppv_digest_words as its comment defines it, written out plainly: four
 * FNV-1a lanes over little-endian 8-byte words (word i to lane i % 4),
 * the tail zero-padded to a whole round, the length and the lanes folded,
 * then h ^ h >> 29. */
static uint64_t digest_by_definition(const unsigned char *p, size_t n) {
    const uint64_t prime = 1099511628211ULL;
    uint64_t lane[4] = {1469598103934665603ULL, 0x9e3779b97f4a7c15ULL, 0xc2b2ae3d27d4eb4fULL,
                        0x165667b19e3779f9ULL};
    size_t rounds = n / 32 + 1; /* the last round holds the tail (maybe empty) */
    for (size_t r = 0; r < rounds; r++)
        for (size_t j = 0; j < 4; j++) {
            uint64_t w = 0;
            for (size_t b = 0; b < 8; b++) {
                size_t at = r * 32 + j * 8 + b;
                w |= (uint64_t)(at < n ? p[at] : 0) << (8 * b);
            }
            lane[j] = (lane[j] ^ w) * prime;
        }
    uint64_t h = (uint64_t)n * prime;
    for (int j = 0; j < 4; j++)
        h = (h ^ lane[j]) * prime;
    return h ^ h >> 29;
}

/* spec/digests.md's test vectors, which python/ppv/digest.py (the
 * reference) gives too (tests/python/test_record.py): inputs of n bytes
 * 0, 1, ..., n-1, as the spec defines them. */
static void test_digests_give_the_specs_test_vectors(void **state) {
    (void)state;
    unsigned char bytes[64];
    for (int i = 0; i < 64; i++) bytes[i] = (unsigned char)i;
    static const struct {
        size_t n;
        uint64_t words, fnv;
    } v[] = {
        {0, 0xbc4be1c4bb7314f2ULL, 0x14650fb0739d0383ULL},
        {31, 0x519bb161b6ec4eecULL, 0xa53c4f9d3201a46eULL},
        {32, 0x512b4da984902300ULL, 0xc71fb91bf8ca6c03ULL},
        {33, 0xcd54939c3be23c49ULL, 0x2553ad87bff5bf79ULL},
    };
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        assert_int_equal(ppv_digest_words(bytes, v[k].n), v[k].words);
        assert_int_equal(ppv_digest(bytes, v[k].n), v[k].fnv);
    }
    /* the byte digest's basis is FNV's offset basis with its last digit
     * dropped, not FNV-1a's: the empty input shows it */
    assert_int_equal(ppv_digest(bytes, 0), 1469598103934665603ULL);
    assert_true(ppv_digest(bytes, 0) != 14695981039346656037ULL);
    /* the envelope chain: "call_id=5\n", then one tensor of bytes 0..33 */
    ppv_tensor t = {.dtype = PPV_DTYPE_BF16, .rank = 1, .dims = {17}, .data = bytes};
    const ppv_tensor *ts[1] = {&t};
    assert_int_equal(pp_envelope_digest_text("call_id=5\n", 10, ts, 1), 0x7ac67418da5d56bcULL);
    assert_int_equal(ppv_generator_digest("tp-mlp", "1", "hidden=32,seed=9"),
                     0x24ea5d73125440b3ULL);
}

/* Stage 0 seals an envelope from the frame it sends (pp_frame_seal): the
 * same digest and the same bytes as framing the envelope with the digest
 * ppv_envelope_digest gives, with KV recompute's tensors and without. The
 * leader's first try digests the text as it arrived
 * (pp_envelope_digest_text): the same digest on the canonical text, with
 * its digest line or without, and another on a text written otherwise
 * (then the leader makes the canonical text). */
static void test_a_sealed_frame_is_the_frame_of_the_sealed_envelope(void **state) {
    (void)state;
    for (int recompute = 0; recompute < 2; recompute++) {
        bufs b;
        ppv_envelope e;
        make_infer(&e, &b, 5, 2, recompute, 0, 4);
        e.noise_scale = 0.5;
        ppv_frame f, want;
        char msg[512];
        assert_int_equal(ppv_envelope_frame_unchecked(&e, &f, msg, sizeof msg), PPV_FAIL_NONE);
        assert_null(strstr(f.meta, "envelope_digest_i64="));
        uint64_t bare = pp_envelope_digest_text(f.meta, (size_t)f.header[6], f.tensors,
                                                f.ntensors);
        int64_t sealed = 0;
        assert_int_equal(pp_frame_seal(&f, &sealed), 0);
        assert_true(sealed != 0);
        assert_int_equal((uint64_t)sealed, ppv_envelope_digest(&e));
        assert_int_equal(bare, ppv_envelope_digest(&e));
        e.envelope_digest_i64 = sealed;
        assert_int_equal(ppv_envelope_frame_unchecked(&e, &want, msg, sizeof msg), PPV_FAIL_NONE);
        assert_int_equal(f.header[6], want.header[6]);
        assert_memory_equal(f.header, want.header, sizeof f.header);
        assert_string_equal(f.meta, want.meta);
        /* as the leader receives it: the line is left out of the digest */
        assert_int_equal(pp_envelope_digest_text(f.meta, (size_t)f.header[6], f.tensors,
                                                 f.ntensors),
                         (uint64_t)sealed);
        /* another sender's text of the same envelope ("0.50"): another digest */
        char other[8192];
        const char *at = strstr(f.meta, "\nnoise_scale=0.5\n");
        assert_non_null(at);
        size_t head = (size_t)(at - f.meta) + strlen("\nnoise_scale=0.5");
        assert_true((size_t)f.header[6] + 2 < sizeof other);
        memcpy(other, f.meta, head);
        memcpy(other + head, "0", 1);
        memcpy(other + head + 1, f.meta + head, (size_t)f.header[6] - head + 1);
        assert_true(pp_envelope_digest_text(other, (size_t)f.header[6] + 1, f.tensors,
                                            f.ntensors) != (uint64_t)sealed);
        ppv_frame_free(&f);
        ppv_frame_free(&want);
    }
}

static void test_output_digest_follows_its_definition_and_sees_every_word(void **state) {
    (void)state;
    unsigned char buf[300];
    for (size_t k = 0; k < sizeof buf; k++)
        buf[k] = (unsigned char)(k * 37 + 11);
    for (size_t n = 0; n <= sizeof buf; n++)
        if (ppv_digest_words(buf, n) != digest_by_definition(buf, n))
            fail_msg("%zu bytes: %016llx, the definition gives %016llx", n,
                     (unsigned long long)ppv_digest_words(buf, n),
                     (unsigned long long)digest_by_definition(buf, n));
    /* pinned: recorded files hold these digests */
    assert_true(ppv_digest_words("", 0) == 0xbc4be1c4bb7314f2ULL);
    assert_true(ppv_digest_words("abc", 3) == 0x828cd43f237438d7ULL);
    /* any one bit of 200 bytes changes it; a zero byte more changes it */
    uint64_t base = ppv_digest_words(buf, 200);
    for (size_t bit = 0; bit < 200 * 8; bit++) {
        buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        assert_true(ppv_digest_words(buf, 200) != base);
        buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    }
    buf[200] = 0;
    assert_true(ppv_digest_words(buf, 201) != base);
}

/* Tensor blocks a thread gives back come back zeroed, as calloc's, for a
 * size they fit without waste; plain malloc blocks mix with them both
 * ways (given back, and freed with free()). */
/* Unframes (header, meta) into *got, which must succeed. */
static void unframe_ok(const int64_t *header, const char *meta, ppv_envelope *got,
                       ppv_tensor **order, int *n) {
    char msg[512] = "";
    if (ppv_envelope_unframe(header, meta, got, order, n, msg, sizeof msg) != PPV_FAIL_NONE)
        fail_msg("unframe: %s", msg);
}

/* A broadcast hands every mesh rank the bytes its leader unframed a moment
 * before, on the same thread in a mock world: the same bytes unframed
 * again give the same envelope with tensor memory of its own, zeroed;
 * a changed byte of the text or of the header is read afresh. */
static void test_the_same_bytes_unframed_again_are_the_same_envelope(void **state) {
    (void)state;
    bufs b;
    ppv_envelope e, first, again;
    ppv_contract_order o = {4, 1, 0};
    make_infer(&e, &b, 5, 2, 0, 1, 3);
    ppv_frame f;
    char msg[512], buf[4096];
    assert_int_equal(ppv_envelope_frame(&e, &o, &f, msg, sizeof msg), PPV_FAIL_NONE);
    ppv_tensor *o1[PPV_FRAME_MAX_TENSORS], *o2[PPV_FRAME_MAX_TENSORS];
    int n1 = 0, n2 = 0;
    unframe_ok(f.header, f.meta, &first, o1, &n1);
    deliver(&f, o1, n1); /* the first copy's memory is written */
    unframe_ok(f.header, f.meta, &again, o2, &n2);
    assert_int_equal(n1, 4);
    assert_int_equal(n2, 4);
    for (int k = 0; k < 4; k++) {
        /* the same tensor of each copy, in the same place of the order */
        assert_int_equal((char *)o2[k] - (char *)&again, (char *)o1[k] - (char *)&first);
        assert_ptr_not_equal(o2[k]->data, o1[k]->data);
        size_t bytes = ppv_tensor_bytes(o2[k]);
        assert_int_equal(bytes, ppv_tensor_bytes(o1[k]));
        for (size_t i = 0; i < bytes; i++)
            assert_int_equal(((unsigned char *)o2[k]->data)[i], 0);
    }
    ppv_envelope a = first, c = again;
    ppv_tensor *ta[] = {&a.conditioning_embeds, &a.latents_in, &a.current_denoising_step_list,
                        &a.context_frames};
    ppv_tensor *tc[] = {&c.conditioning_embeds, &c.latents_in, &c.current_denoising_step_list,
                        &c.context_frames};
    for (int k = 0; k < 4; k++)
        ta[k]->data = tc[k]->data = NULL;
    assert_memory_equal(&a, &c, sizeof a);
    ppv_envelope_free_tensors(&first);
    ppv_envelope_free_tensors(&again);
    /* one digit of the text changed, its length and header the same */
    int64_t h[PPV_FRAME_HEADER];
    edit_meta(&f, "base_seed=", "base_seed=43\n", buf, h);
    assert_memory_equal(h, f.header, sizeof h);
    unframe_ok(h, buf, &again, o2, &n2);
    assert_int_equal(again.base_seed, 43);
    ppv_envelope_free_tensors(&again);
    /* the header alone changed: the text no longer agrees with it */
    unframe_ok(f.header, f.meta, &first, o1, &n1);
    ppv_envelope_free_tensors(&first);
    memcpy(h, f.header, sizeof h);
    h[1] = 6;
    expect_unframe(h, f.meta, "PPV-FIELD",
                   "header says call_id 6, metadata 5 (call_id 6, chunk_index 2, cache_epoch 0)");
    /* a newer sender's field is counted and named on every copy */
    int len = snprintf(buf, sizeof buf, "%szz_newer=1\n", f.meta);
    memcpy(h, f.header, sizeof h);
    h[6] = len;
    for (int k = 0; k < 2; k++) {
        unframe_ok(h, buf, &again, o2, &n2);
        assert_int_equal(again.unknown_fields, 1);
        assert_string_equal(again.unknown_field, "zz_newer");
        ppv_envelope_free_tensors(&again);
    }
    ppv_frame_free(&f);
}

/* Integers are written as printf writes them, from the first power of ten
 * to the last and either side of each, negative ones too. */
static void test_metadata_integers_are_written_as_printf_writes_them(void **state) {
    (void)state;
    bufs b;
    ppv_envelope e;
    ppv_contract_order o = {4, 1, 0};
    make_infer(&e, &b, 5, 2, 0, 0, 4);
    int64_t values[3 * 19 + 4] = {0, INT64_MAX, INT64_MIN, INT64_MIN + 1};
    int nv = 4;
    int64_t p = 1;
    for (int k = 1; k <= 18; k++) {
        p *= 10; /* up to 10^18, which int64_t holds */
        for (int64_t d = -1; d <= 1; d++)
            values[nv++] = (k % 2 ? 1 : -1) * (p + d);
    }
    for (int k = 0; k < nv; k++) {
        e.base_seed = values[k];
        ppv_frame f;
        char msg[512], want[64];
        assert_int_equal(ppv_envelope_frame(&e, &o, &f, msg, sizeof msg), PPV_FAIL_NONE);
        snprintf(want, sizeof want, "\nbase_seed=%" PRId64 "\n", values[k]);
        if (!strstr(f.meta, want)) fail_msg("%s not in the text:\n%s", want + 1, f.meta);
        ppv_envelope got;
        ppv_tensor *order[PPV_FRAME_MAX_TENSORS];
        int n = 0;
        unframe_ok(f.header, f.meta, &got, order, &n);
        assert_int_equal(got.base_seed, values[k]);
        ppv_envelope_free_tensors(&got);
        ppv_frame_free(&f);
    }
}

static void test_tensor_blocks_come_back_zeroed_and_mix_with_malloc(void **state) {
    (void)state;
    unsigned char *a = ppv_block_take(1000);
    assert_non_null(a);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(a[i], 0);
    memset(a, 0xab, 1000);
    ppv_block_give(a);
    unsigned char *b = ppv_block_take(1000);
    assert_ptr_equal(b, a); /* the block given back */
    for (int i = 0; i < 1000; i++)
        assert_int_equal(b[i], 0);
    free(b);
    unsigned char *m = malloc(3000);
    assert_non_null(m);
    memset(m, 0x5a, 3000);
    ppv_block_give(m);
    unsigned char *small = ppv_block_take(10); /* 3000 bytes would waste: not that block */
    assert_true(small != m);
    unsigned char *c = ppv_block_take(2900);
    assert_ptr_equal(c, m);
    for (int i = 0; i < 2900; i++)
        assert_int_equal(c[i], 0);
    ppv_block_give(c);
    ppv_block_give(small);
    unsigned char *d = ppv_block_take(2900), *e = ppv_block_take(10);
    assert_ptr_equal(d, m);
    assert_ptr_equal(e, small);
    free(d);
    free(e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expected_generator_calls_is_steps_plus_one_when_recomputing),
        cmocka_unit_test(test_a_valid_stream_passes_every_rule),
        cmocka_unit_test(test_call_count_drift_is_fm02),
        cmocka_unit_test(test_context_frames_present_iff_recompute),
        cmocka_unit_test(test_tensor_dtype_and_shape_are_fm07),
        cmocka_unit_test(test_ids_must_keep_their_order),
        cmocka_unit_test(test_epoch_rules_for_the_first_chunk),
        cmocka_unit_test(test_fields_out_of_range_are_refused),
        cmocka_unit_test(test_framing_is_canonical_and_round_trips),
        cmocka_unit_test(test_framing_refuses_before_the_header),
        cmocka_unit_test(test_unframing_refuses_what_the_contract_does_not_know),
        cmocka_unit_test(test_stage0_accepts_drops_or_rejects_results),
        cmocka_unit_test(test_results_round_trip_with_and_without_latents),
        cmocka_unit_test(test_metadata_integers_are_read_as_strtoll_reads_them),
        cmocka_unit_test(test_metadata_floats_round_trip_to_the_bit),
        cmocka_unit_test(test_measured_times_are_written_as_printf_writes_them_and_read_back),
        cmocka_unit_test(test_output_digest_follows_its_definition_and_sees_every_word),
        cmocka_unit_test(test_digests_give_the_specs_test_vectors),
        cmocka_unit_test(test_a_sealed_frame_is_the_frame_of_the_sealed_envelope),
        cmocka_unit_test(test_tensor_blocks_come_back_zeroed_and_mix_with_malloc),
        cmocka_unit_test(test_the_same_bytes_unframed_again_are_the_same_envelope),
        cmocka_unit_test(test_metadata_integers_are_written_as_printf_writes_them),
    };
    return cmocka_run_group_tests(tests, NULL, tmp_cleanup);
}
