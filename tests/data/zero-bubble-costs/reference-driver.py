#!/usr/bin/python3
"""Driver: run the zero-bubble reference schedulers (sail-sg/zero-bubble-pipeline-parallelism)
at given costs and write PyTorch compute_only CSV. Usage:
  ZB_SCHED=<checkout>/megatron/core/pipeline_parallel/zerobubble/scheduler \
  /usr/bin/python3 reference-driver.py OUTDIR P M F I W C [kinds...]   (F, I, W, C: the reference's cost_f, cost_b, cost_w, cost_comm)
kinds: zb-h1 zb-h2 zbv v-half v-min
ZBV_MAX_MEM=N: zbv's max_mem in chunk activations (default: the reference's, 2p); the file
name then ends in -capN.
"""
import sys, types, json, os

SCHED = os.environ.get("ZB_SCHED", "/tmp/zbref/megatron/core/pipeline_parallel/zerobubble/scheduler")
# Stub the megatron packages so the scheduler modules import without megatron's __init__ chain.
for name in ["megatron", "megatron.core", "megatron.core.pipeline_parallel",
             "megatron.core.pipeline_parallel.zerobubble",
             "megatron.core.pipeline_parallel.zerobubble.scheduler"]:
    mod = types.ModuleType(name)
    mod.__path__ = [SCHED] if name.endswith("scheduler") else []
    sys.modules[name] = mod
_tr = types.ModuleType("megatron.training")
_tr.get_args = lambda: None  # only used by communication passes we do not run
sys.modules["megatron.training"] = _tr

import importlib
graph = importlib.import_module("megatron.core.pipeline_parallel.zerobubble.scheduler.graph")
zb = importlib.import_module("megatron.core.pipeline_parallel.zerobubble.scheduler.zb")
zbv = importlib.import_module("megatron.core.pipeline_parallel.zerobubble.scheduler.zbv")
zbvg = importlib.import_module("megatron.core.pipeline_parallel.zerobubble.scheduler.zbv_greedy")
GraphConfig, F, B, W = graph.GraphConfig, graph.F, graph.B, graph.W


def add_time_span(config, local_order):
    """Span (first start to last completion, max over ranks) from the reference's own
    passes.add_time, which replays each rank's order ASAP with cost_comm between ranks."""
    passes = importlib.import_module("megatron.core.pipeline_parallel.zerobubble.scheduler.passes")
    timed = passes.add_time(config, local_order)
    spans = [max(n.completion_time for n in ns) - min(n.start_time for n in ns) for ns in timed]
    return max(spans)


def peak_mem(local_order, mf, mb, mw):
    peaks = []
    for ns in local_order:
        cur = best = 0
        for n in ns:
            cur += {F: mf, B: mb, W: mw}[n.type]
            best = max(best, cur)
        peaks.append(best)
    return peaks


def to_csv(local_order):
    rows = []
    for ns in local_order:
        rows.append(",".join(f"{n.layer_group_idx}{ {F: 'F', B: 'I', W: 'W'}[n.type] }{n.microbatch}"
                             for n in ns))
    return "\n".join(rows) + "\n"


def run(kind, p, m, f, i, w, c):
    info = {"kind": kind, "p": p, "m": m, "F": f, "I": i, "W": w, "C": c}
    if kind in ("zb-h1", "zb-h2"):
        cap = p if kind == "zb-h1" else 2 * p - 1
        config = GraphConfig(cost_f=[float(f)] * p, cost_b=[float(i)] * p, cost_w=[float(w)] * p,
                             cost_comm=float(c), mem_f=[1] * p, mem_b=[0] * p, mem_w=[-1] * p,
                             max_mem=[cap] * p, print_scaling=1, n_stages=p, n_micro=m)
        g = zb.Graph.build_graph(p, m, config)
        best_time, order, complete_time = zb.initial_solution(g, print_result=False)
        local_order = zb.create_scheduled_nodes(g, complete_time)
        info["ref_call"] = f"zb.initial_solution(zb.Graph.build_graph({p},{m},GraphConfig(cost_f={float(f)},cost_b={float(i)},cost_w={float(w)},cost_comm={float(c)},mem_f=1,mem_b=0,mem_w=-1,max_mem={cap}))) + zb.create_scheduled_nodes (= zb.create_schedule)"
        makespan = best_time
        info["ref_makespan"] = makespan
        info["ref_bubble"] = (makespan - m * (f + i + w)) / makespan
        info["ref_peak_units"] = max(peak_mem(local_order, 1, 0, -1))
    elif kind == "zbv":
        config = GraphConfig(cost_f=[float(f)] * p, cost_b=[float(i)] * p, cost_w=[float(w)] * p,
                             cost_comm=float(c), mem_f=[1] * p, mem_b=[0] * p, mem_w=[-1] * p,
                             max_mem=None, print_scaling=1, max_chunks=2, n_stages=p, n_micro=m)
        cap = int(os.environ["ZBV_MAX_MEM"]) if os.environ.get("ZBV_MAX_MEM") else None
        pg = zbv.PipelineGraph(p, m, f, i, w, c, f_mem=1, b_mem=0, w_mem=-1, max_mem=cap)
        # create_schedule picks the best of its 4 fill variants; rerun the same selection to get
        # the reference's own max_bubble/end_time (create_schedule only prints the rate).
        best = None
        for fill_b in [True, False]:
            for fill_f in [True, False]:
                s, e, mb_ = pg.try_v_schedule(fill_b=fill_b, fill_f=fill_f)
                if best is None or mb_ < best[2]:
                    best = (s, e, mb_)
        local_order = pg.create_schedule(config)
        expected = (f + i + w) * m * 2
        info["ref_call"] = f"zbv.PipelineGraph({p},{m},{f},{i},{w},{c},f_mem=1,b_mem=0,w_mem=-1,max_mem={cap}).create_schedule(config)  [max_mem None: 2p chunk units]"
        info["ref_max_bubble"] = best[2]
        info["ref_makespan"] = expected + best[2]
        info["ref_bubble"] = best[2] / (expected + best[2])
        info["ref_peak_units"] = max(peak_mem(local_order, 1, 0, -1)) / 2
    else:
        mc = "half" if kind == "v-half" else "min"
        config = GraphConfig(cost_f=[float(f)] * p, cost_b=[float(i)] * p, cost_w=[float(w)] * p,
                             cost_comm=float(c), mem_f=[1] * p, mem_b=[0] * p, mem_w=[-1] * p,
                             max_mem=None, print_scaling=1, max_chunks=2, n_stages=p, n_micro=m)
        pg = zbvg.PipelineGraph(p, m, mc, f, i, w, c)
        pattern = {"min": pg.stable_pattern_v_min, "half": pg.stable_pattern_v_half}[mc](p)
        max_time, _, _ = pg.schedule_from_pattern(pattern, m, [pg.fbw_cost[x // 2] for x in range(6)],
                                                  do_reorder=True)
        local_order = pg.create_schedule(config)
        expected = (f + i + w) * m * 2
        info["ref_call"] = f"zbv_greedy.PipelineGraph({p},{m},'{mc}',{f},{i},{w},{c}).create_schedule(config)"
        info["ref_makespan"] = max_time
        info["ref_bubble"] = (max_time - expected) / max_time
        info["ref_peak_units"] = max(peak_mem(local_order, 1, 0, -1)) / 2
    # Cross-check with the reference's own passes.add_time evaluator.
    info["ref_add_time_makespan"] = add_time_span(config, local_order)
    return info, to_csv(local_order)


if __name__ == "__main__":
    outdir = sys.argv[1]
    p, m, f, i, w, c = map(int, sys.argv[2:8])
    kinds = sys.argv[8:] or ["zb-h1", "zb-h2", "zbv", "v-half", "v-min"]
    for kind in kinds:
        info, csv = run(kind, p, m, f, i, w, c)
        fn = f"{kind}-{p}-{m}-f{f}b{i + w}w{w}c{c}.csv"
        if kind == "zbv" and os.environ.get("ZBV_MAX_MEM"):
            fn = fn[:-4] + f"-cap{os.environ['ZBV_MAX_MEM']}.csv"
        info["file"] = fn
        with open(os.path.join(outdir, fn), "w") as fh:
            fh.write(csv)
        print("RESULT " + json.dumps(info), flush=True)
