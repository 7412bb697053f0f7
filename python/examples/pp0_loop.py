"""A PP0 pipeline in numpy, recorded for `ppv conform`.

Stage 0 and a one-rank "mesh" live in one process: stage 0 plans each
chunk's envelope, keeps at most D_in envelopes in flight and D_out results
waiting to be decoded, sends envelope k+1 before it decodes result k, sends
a heartbeat NOOP, and makes a hard cut before chunk 4 while an INFER is in
flight: it abandons that call, bumps cache_epoch, starts the new epoch with
init_cache, and when the abandoned call's result comes late it drops it.
The mesh's generator is a stand-in (each denoising step halves the latents
and adds 1/8), and every result carries the digest of its latents_out.
Everything stage 0 does is recorded with ppv.record's event log.

    python3 python/examples/pp0_loop.py loop.h5              # conforms
    python3 python/examples/pp0_loop.py loop.h5 --bug decode-late
        # stage 0 takes the late result and decodes it: ppv conform names
        # the stale result (FM-10) and the decode of an abandoned call

Needs numpy and h5py; run with ppv's package importable (PYTHONPATH=python
from the source tree, or installed).
"""

import argparse
import collections
import sys

import numpy as np

from ppv.record import ACTIONS, ENVELOPE_FIELDS, Recorder, digest, to_bf16_bits

H = W = 32          # pixels: latents are (1, 3, 16, H/8, W/8)
STEPS = 2           # denoising steps per chunk
CHUNKS = 8
CUT = 4             # the hard cut comes before this chunk
D_IN = D_OUT = 2


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def envelope(call_id, chunk_index, epoch, k):
    """Chunk k's INFER envelope: every contract field, no recompute."""
    e = {name: 0 for name, _ in ENVELOPE_FIELDS}
    noise = np.random.default_rng(k).standard_normal((1, 3, 16, H // 8, W // 8))
    e.update(pp_envelope_version=1, action=ACTIONS["INFER"], call_id=call_id,
             chunk_index=chunk_index, cache_epoch=epoch, height=H, width=W,
             current_start_frame=3 * chunk_index, num_denoise_steps=STEPS,
             expected_generator_calls=STEPS, init_cache=int(chunk_index == 0), base_seed=k,
             kv_cache_attention_bias=0.3, noise_scale=1.0, pp_disable_vace=1,
             conditioning_embeds=to_bf16_bits(np.ones((1, 4, 8), np.float32)),
             latents_in=to_bf16_bits(noise.astype(np.float32)),
             current_denoising_step_list=np.array([1000, 500][:STEPS], dtype=np.int64),
             context_frames=None)
    return e


def mesh(e):
    """The mesh's answer to e: its generator run num_denoise_steps times."""
    x = bf16_to_f32(e["latents_in"])
    for _ in range(e["num_denoise_steps"]):
        x = x * np.float32(0.5) + np.float32(0.125)
    out = to_bf16_bits(x)
    return {"pp_result_version": 1, "call_id": e["call_id"], "chunk_index": e["chunk_index"],
            "cache_epoch": e["cache_epoch"], "observed_generator_calls": e["num_denoise_steps"],
            "mesh_current_start_frame": e["current_start_frame"],
            "output_digest_i64": digest(out), "ok": 1, "error_message": "", "tB_ms": 0.0,
            "t_mesh_idle_ms": 0.0, "latents_out": out}


def run(path, bug):
    stage0(Recorder(path, events={"d_in": D_IN, "d_out": D_OUT}), bug)


def stage0(rec, bug=None):
    """Stage 0's loop, every step recorded in rec (a Recorder with an event
    log of D_IN, D_OUT), which it closes."""
    inflight, ready = collections.deque(), collections.deque()
    late = []                      # results of calls abandoned at the cut
    call_id, epoch, chunk_index = 0, 0, 0
    k = 0
    while k < CHUNKS or inflight or ready:
        if k < CHUNKS and len(inflight) < D_IN and len(ready) < D_OUT:
            if k == CUT:           # the hard cut: give up what is in flight
                for e in inflight:
                    rec.abandoned(e)
                    late.append(mesh(e))
                inflight.clear()
                epoch, chunk_index = epoch + 1, 0
            e = envelope(call_id, chunk_index, epoch, k)
            rec.sent(e)
            inflight.append(e)
            call_id, chunk_index, k = call_id + 1, chunk_index + 1, k + 1
            if k == 2:             # a heartbeat: a NOOP consumes a call_id too
                rec.heartbeat(call_id, epoch)
                call_id += 1
            for r in late:         # the late result arrives after the cut
                if bug == "decode-late":
                    rec.received(r, "accepted")
                    rec.decoded(r)
                else:
                    rec.received(r, "late")
            late = []
            continue
        if ready:                  # decode only while nothing can be sent
            rec.decoded(ready.popleft())
            continue
        r = mesh(inflight.popleft())
        rec.received(r, "accepted")
        ready.append(r)
    bye = {name: 0 for name, _ in ENVELOPE_FIELDS}
    bye.update(pp_envelope_version=1, action=ACTIONS["SHUTDOWN"], call_id=call_id,
               cache_epoch=epoch, kv_cache_attention_bias=0.3, pp_disable_vace=1)
    rec.sent(bye)
    rec.close()


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="the recording to write")
    ap.add_argument("--bug", choices=["decode-late"], help="break stage 0 on purpose")
    a = ap.parse_args(argv)
    run(a.out, a.bug)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
