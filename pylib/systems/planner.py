"""A 3-D/4-D layout planner: memory per GPU, pipeline bubble, communication and step time of a
DP x TP x PP (x CP) layout, and the model against published training runs.

The pieces are the course's own: memory per GPU is chapter 10's calculator
(pylib.systems.memory.training_memory), the bubble is pylib.systems.pipeline's (p-1)/(v m) (its
tests check it against the schedule simulator), communication times are chapter 11's alpha-beta
costs (pylib.systems.collectives). What this module adds is the bookkeeping of a step:

    FLOPs of one micro-batch through one stage  ->  t_f, t_b = 2 t_f (+ t_f with full recompute)
    + tensor-parallel all-reduces on the critical path (4 per layer and micro-batch, 6 with recompute)
    + context-parallel key/value passes (cp - 1 per layer and micro-batch, forward and backward)
    pipeline: (m + (p-1)/v) (t_f + t_b) + point-to-point sends between stages
    + data-parallel gradient all-reduce at the end of the step (not overlapped)

Compute runs at `efficiency` x peak. That one number stands for everything this model does not
describe (kernel efficiency, non-matmul work, launch gaps), and it is fitted, one per GPU type, on
one published run; every other run is a prediction.

FLOPs follow Narayanan et al. 2021 (section 5.1, eq. 3): per layer and token 24 h^2 (weights, with
a 4h MLP) + 4 s h (attention scores and values) forward, the logit layer 2 h V; training is three
times the forward, and full activation recomputation adds one more forward of the layers (their
"achieved teraFLOP/s" counts it). Model FLOPs (for MFU, Chowdhery et al. 2022, appendix B) leave
recomputation out. Grouped-query attention and a gated MLP change the weight term.

Legend: L layers, h width, F MLP width, s sequence, b micro-batch, B global batch (sequences),
m micro-batches per pipeline, p = pp, v chunks, t = tp.
"""

import dataclasses
import math

from pylib.systems import collectives, memory, pipeline

# ---------------------------------------------------------------------------
# Inputs


@dataclasses.dataclass(frozen=True)
class Cluster:
    """The machine: GPUs, memory per GPU, peak FLOP/s, and two link levels (inside a node, between)."""

    gpus: int
    gpus_per_node: int
    memory_bytes: float
    peak_flops: float
    intra_bytes_per_s: float  # per GPU, inside a node (NVLink)
    inter_bytes_per_s: float  # per GPU, between nodes
    intra_alpha: float = 5e-6  # seconds per message: an assumption, not a cited figure
    inter_alpha: float = 1e-5
    name: str = ""


@dataclasses.dataclass(frozen=True)
class Layout:
    """How the GPUs are used: dp x tp x pp x cp = GPUs, the batch, the schedule and the memory savers."""

    dp: int
    tp: int = 1
    pp: int = 1
    cp: int = 1
    global_batch: int = 1  # sequences per step
    micro_batch: int = 1
    chunks: int = 1  # v: virtual pipeline stages per GPU (interleaving)
    recompute: str = "none"  # "none", "selective", "full" (chapter 10)
    sequence_parallel: bool = False
    zero_stage: int = 0
    schedule: str = "megatron"  # "megatron": interleaving needs m a multiple of pp; "llama3": any m


SCHEDULES = ("megatron", "llama3")


def _count(x, name, hi=10 ** 7):
    if isinstance(x, bool) or not isinstance(x, int) or not 1 <= x <= hi:
        raise ValueError(f"{name} must be a whole number between 1 and {hi:,}, not {x!r}")
    return x


def layout_problems(shape, cluster, layout):
    """Why a layout cannot run, as sentences ([] when it can)."""
    out = []
    try:
        for name in ("dp", "tp", "pp", "cp", "global_batch", "micro_batch", "chunks"):
            _count(getattr(layout, name), name)
        _count(cluster.gpus, "GPUs")
    except ValueError as e:
        return [str(e)]
    product = layout.dp * layout.tp * layout.pp * layout.cp
    if product != cluster.gpus:
        out.append(f"DP x TP x PP x CP = {layout.dp} x {layout.tp} x {layout.pp} x {layout.cp} = {product:,} "
                   f"does not match the {cluster.gpus:,} GPUs")
    if shape.n_head % layout.tp:
        out.append(f"TP = {layout.tp} does not divide the {shape.n_head} heads")
    if layout.pp > shape.n_layer:
        out.append(f"PP = {layout.pp} stages is more than the {shape.n_layer} layers")
    elif layout.chunks * layout.pp > shape.n_layer + (2 if layout.schedule == "llama3" else 0):
        # Llama 3's schedule gives the embedding and the output layer a chunk each (section 3.3.2)
        out.append(f"{layout.chunks} chunks x {layout.pp} stages is more than the {shape.n_layer} layers"
                   + (" and the two end chunks" if layout.schedule == "llama3" else ""))
    per_replica = layout.global_batch / layout.dp
    if per_replica != int(per_replica) or per_replica % layout.micro_batch:
        out.append(f"the global batch {layout.global_batch} does not split into {layout.dp} replicas of whole "
                   f"micro-batches of {layout.micro_batch}")
    elif layout.schedule == "megatron" and layout.chunks > 1 and (per_replica // layout.micro_batch) % layout.pp:
        out.append(f"interleaving needs the micro-batches per replica ({int(per_replica // layout.micro_batch)}) "
                   f"to be a multiple of PP = {layout.pp}")
    if shape.seq_len % layout.cp:
        out.append(f"CP = {layout.cp} does not divide the sequence length {shape.seq_len}")
    if layout.schedule not in SCHEDULES:
        out.append(f"schedule must be one of {SCHEDULES}")
    if layout.recompute not in memory.RECOMPUTE_MODES:
        out.append(f"recompute must be one of {memory.RECOMPUTE_MODES}")
    return out


# ---------------------------------------------------------------------------
# FLOPs


ATTENTION_CONVENTIONS = ("full", "causal")


def layer_forward_flops_per_token(shape, kv_heads=None, attention="full"):
    """Forward FLOPs of one layer per token: 2 x (weights that multiply) + attention.

    attention "full" counts QK^T and attention over values for every (query, key) pair, 4 s h
    (Narayanan et al. eq. 3, Korthikanti et al. eq. 7); "causal" counts only the pairs the mask keeps,
    half of it (2 s h): the two conventions a published MFU may use."""
    if attention not in ATTENTION_CONVENTIONS:
        raise ValueError(f"attention must be one of {ATTENTION_CONVENTIONS}, not {attention!r}")
    h, F = shape.n_embd, shape.ffn_hidden
    kv = shape.kv_width if kv_heads is None else kv_heads * shape.head_dim  # width of k and of v
    weights = 2 * h * h + 2 * h * kv + (3 if shape.gated_mlp else 2) * h * F  # q, o; k, v; the MLP
    return 2 * weights + (4 if attention == "full" else 2) * shape.seq_len * h


def step_flops(shape, global_batch, recompute="none", kv_heads=None, attention="full"):
    """{"model", "hardware"} FLOPs of one step (hardware adds full recomputation's extra forward)."""
    tokens = global_batch * shape.seq_len
    layers_fwd = shape.n_layer * layer_forward_flops_per_token(shape, kv_heads, attention) * tokens
    logits_fwd = 2 * shape.n_embd * shape.vocab_size * tokens
    model = 3 * (layers_fwd + logits_fwd)
    hardware = model + (layers_fwd if recompute == "full" else 0)
    return {"model": model, "hardware": hardware}


# ---------------------------------------------------------------------------
# The plan


def plan(shape, cluster, layout, efficiency=1.0, kv_heads=None, grad_bytes=2, act_bytes=2, attention="full"):
    """Memory per GPU, bubble, communication per step, step time and MFU of a layout -> dict.

    The time model charges full attention (4 s h a layer and token); `attention` is only the
    convention of the FLOPs counted for MFU and HFU. Raises ValueError with every reason a layout
    cannot run (see layout_problems)."""
    problems = layout_problems(shape, cluster, layout)
    if problems:
        raise ValueError("; ".join(problems))
    if not 0 < efficiency <= 1:
        raise ValueError(f"efficiency must be in (0, 1], not {efficiency!r}")
    L, h, s = shape.n_layer, shape.n_embd, shape.seq_len
    dp, tp, pp, cp, v, b = layout.dp, layout.tp, layout.pp, layout.cp, layout.chunks, layout.micro_batch
    m = layout.global_batch // (dp * b)  # micro-batches per pipeline per step
    layers_per_stage = math.ceil(L / pp)  # the fullest stage sets the pace and the memory

    # memory: chapter 10's calculator, for the fullest stage (a model of pp x ceil(L/pp) layers)
    mem_shape = dataclasses.replace(shape, n_layer=pp * layers_per_stage, seq_len=s // cp)
    mem = memory.training_memory(mem_shape, micro_batch=b, precision="mixed", optimizer="adamw",
                                 recompute=layout.recompute, zero_stage=layout.zero_stage, dp=dp * cp,
                                 tp=tp, pp=pp, sequence_parallel=layout.sequence_parallel)

    # compute of one micro-batch through one stage, on one GPU of its tp x cp group
    peak = cluster.peak_flops * efficiency
    layer_fwd = layer_forward_flops_per_token(shape, kv_heads) * b * s / (tp * cp)
    logit_fwd = 2 * h * shape.vocab_size * b * s / (tp * cp) / pp  # spread over the stages
    t_f = (layers_per_stage * layer_fwd + logit_fwd) / peak
    t_b = 2 * t_f + (t_f if layout.recompute == "full" else 0.0)

    # tensor parallelism: all-reduces of a (b, s/cp, h) activation, inside a node if tp fits in one
    tp_link = (cluster.intra_alpha, 1 / cluster.intra_bytes_per_s) if tp <= cluster.gpus_per_node else \
        (cluster.inter_alpha, 1 / cluster.inter_bytes_per_s)
    act = b * (s // cp) * h * act_bytes
    per_layer_ar = 4 + (2 if layout.recompute == "full" else 0)
    t_ar = collectives.ring_all_reduce_time(act, tp, *tp_link)
    tp_time_mb = layers_per_stage * per_layer_ar * t_ar  # per micro-batch, forward + backward
    # context parallelism: cp - 1 passes of k and v blocks per layer, forward and twice backward
    kv_width = shape.kv_width if kv_heads is None else kv_heads * shape.head_dim
    kv_block = 2 * b * (s // cp) * kv_width * act_bytes // tp
    cp_time_mb = 0.0 if cp == 1 else layers_per_stage * 3 * (cp - 1) * (cluster.inter_alpha + kv_block / cluster.inter_bytes_per_s)
    # pipeline: one (b, s/cp, h)/tp send per micro-batch, chunk and direction, between nodes
    p2p = act / tp
    pp_time_mb = 0.0 if pp == 1 else 2 * v * (cluster.inter_alpha + p2p / cluster.inter_bytes_per_s)

    t_mb = t_f + t_b + tp_time_mb + cp_time_mb + pp_time_mb  # one micro-batch through one stage
    bubble = pipeline.bubble_formula(pp, m, v)
    pipeline_time = m * t_mb * (1 + bubble["over_ideal"])  # (m + (p-1)/v) micro-batch slots
    # data parallelism (and cp, whose ranks hold the same weights): the gradient all-reduce
    grads = mem["params_per_device"] * grad_bytes
    dp_group = dp * cp
    dp_link = (cluster.inter_alpha, 1 / cluster.inter_bytes_per_s)
    dp_time = collectives.ring_all_reduce_time(grads, dp_group, *dp_link)
    step = pipeline_time + dp_time

    flops = step_flops(shape, layout.global_batch, layout.recompute, kv_heads, attention)
    gpus = cluster.gpus
    comm_bytes = {  # per GPU per step, payload (wire bytes of a ring are 2(p-1)/p of each all-reduce)
        "tensor_parallel": m * layers_per_stage * per_layer_ar * act * (tp > 1),
        "context_parallel": m * layers_per_stage * 3 * (cp - 1) * kv_block,
        "pipeline": m * (2 * v * p2p) * (pp > 1),
        "data_parallel": grads * (dp_group > 1),
    }
    return {
        "microbatches": m, "layers_per_stage": layers_per_stage,
        "memory": mem, "memory_per_gpu": mem["total"], "fits": mem["total"] <= cluster.memory_bytes,
        "bubble_over_ideal": bubble["over_ideal"], "bubble_of_total": bubble["of_total"],
        "t_forward": t_f, "t_backward": t_b,
        "time": {"compute": m * (t_f + t_b), "bubble": pipeline_time - m * t_mb,
                 "tensor_parallel": m * tp_time_mb, "context_parallel": m * cp_time_mb,
                 "pipeline_p2p": m * pp_time_mb, "data_parallel": dp_time},
        "comm_bytes": comm_bytes,
        "step_seconds": step,
        "model_flops": flops["model"], "hardware_flops": flops["hardware"],
        "model_tflops_per_gpu": flops["model"] / (gpus * step) / 1e12,
        "hardware_tflops_per_gpu": flops["hardware"] / (gpus * step) / 1e12,
        "mfu": flops["model"] / (gpus * step * cluster.peak_flops),
        "hfu": flops["hardware"] / (gpus * step * cluster.peak_flops),
    }


def fit_efficiency(shape, cluster, layout, reported_tflops, metric="hardware_tflops_per_gpu", kv_heads=None,
                   grad_bytes=2, attention="full"):
    """The efficiency at which plan() reproduces one reported throughput (bisection: it is monotone).

    Returns 1.0 when even the full peak falls short (the caller sees it as 'needs more than peak')."""
    lo, hi = 1e-3, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if plan(shape, cluster, layout, mid, kv_heads, grad_bytes, attention=attention)[metric] < reported_tflops:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# ---------------------------------------------------------------------------
# Published runs. Every config and reported figure below is cited where it is typed.

GBPS = 1e9 / 8  # bytes per second in one gigabit per second

# Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
# Megatron-LM", section 5: Selene, 8 x 80-GB A100 per node with NVLink/NVSwitch, eight 200 Gbps HDR
# InfiniBand HCAs per node (one per GPU), A100 16-bit peak 312 teraFLOP/s.
# The NVLink bandwidth is not in the paper: 300 GB/s per GPU per direction is an assumption here.
SELENE_NVLINK_ASSUMED = 300e9


def selene(gpus):
    return Cluster(gpus=gpus, gpus_per_node=8, memory_bytes=80e9, peak_flops=312e12,
                   intra_bytes_per_s=SELENE_NVLINK_ASSUMED, inter_bytes_per_s=200 * GBPS, name="Selene (A100)")


# Table 1 of Narayanan et al. 2021: (params B, heads, hidden, layers, tp, pp, GPUs, batch,
# achieved teraFLOP/s per GPU, % of peak). All use V = 51,200 and s = 2048 (section 5.1), the
# interleaved schedule and full activation recomputation (eq. 3 counts it). Micro-batch size and
# the number of chunks per row are not given: we choose b = 1 and v = 1. That is no bound on the
# bubble: a larger v shrinks it, a larger b (fewer micro-batches) grows it.
MEGATRON_TABLE1 = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 44),
    (3.6, 32, 3072, 30, 2, 1, 64, 512, 138, 44),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142, 46),
    (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 43),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138, 44),
    (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140, 45),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148, 47),
    (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155, 50),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163, 52),
    (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163, 52),
]

# The Llama 3 Herd of Models (Llama Team, AI @ Meta, 2024). Table 3: 405B has 126 layers, width
# 16,384, MLP width 53,248, 128 heads, 8 key/value heads, SwiGLU, vocabulary 128,000.
# Section 3.3.1: H100 GPUs, 80 GB HBM3, 400 Gbps interconnects between GPUs. Section 3.3.2: FSDP
# shards optimizer states and gradients (ZeRO stage 2 in memory terms), gradients are
# reduce-scattered in FP32 (grad_bytes = 4), the 8K runs train without activation checkpointing
# (their attention kernel keeps no (s, s) matrix, which chapter 10's calculator counts as its
# "selective" mode; no recomputed forward is charged), it cites Korthikanti et al. (the paper of
# sequence parallelism) among its tensor-parallelism references without naming sequence
# parallelism: we assume it (without it the replicated activations alone would not fit in 80 GB),
# and the pipeline schedule is an interleaved one whose
# micro-batch count is tunable (no multiple-of-PP constraint: schedule="llama3"), with bubble
# (PP-1)/(V M); one layer less on the first and on the last stage leaves the first chunk only the
# embedding and the last only the output and loss (so 128 chunk slots for 126 layers). The number of chunks V and the micro-batch size b are not given: they are swept
# (llama3_sensitivity), and the chapter's table shows one choice beside that sweep.
# The H100's dense BF16 peak, 989 teraFLOP/s, is half of the 1,979 "with sparsity" of NVIDIA's
# datasheet; NVLink on an H100 SXM is 900 GB/s per GPU counting both directions, 450 GB/s each way.
# Both checked against copies of the datasheet's table, not the datasheet itself.
H100_PEAK = 1979e12 / 2
H100_NVLINK_PER_DIRECTION = 900e9 / 2
LLAMA3_KV_HEADS = 8
LLAMA3_GRAD_BYTES = 4
LLAMA3_405B = memory.TransformerShape(n_layer=126, n_embd=16384, n_head=128, vocab_size=128000, seq_len=8192,
                                      ffn_hidden=53248, norm="rmsnorm", tied_head=False, bias=False,
                                      gated_mlp=True, learned_pos=False, n_kv_head=LLAMA3_KV_HEADS,
                                      name="Llama 3 405B")
# Table 4: (GPUs, TP, CP, PP, DP, seq len, batch size per DP, TFLOPs/GPU, BF16 MFU %).
LLAMA3_TABLE4 = [
    (8192, 8, 1, 16, 64, 8192, 32, 430, 43),
    (16384, 8, 1, 16, 128, 8192, 16, 400, 41),
    (16384, 8, 16, 16, 8, 131072, 16, 380, 38),
]
# The choice shown in the chapter's main table (V chunks per GPU, micro-batch b), and the sweep.
LLAMA3_CHOICE = (4, 1)
LLAMA3_CHUNKS = (1, 2, 4, 8)  # 8 x 16 = 128 chunks: 126 layers, the embedding's and the output's
LLAMA3_MICRO_BATCHES = (1, 2, 4)  # Narayanan et al. 2021, section 3.4 (Figure 8): b = 4 best for their 1B model at (p, t) = (8, 8)


def llama3_cluster(gpus):
    return Cluster(gpus=gpus, gpus_per_node=8, memory_bytes=80e9, peak_flops=H100_PEAK,
                   intra_bytes_per_s=H100_NVLINK_PER_DIRECTION, inter_bytes_per_s=400 * GBPS, name="Llama 3 (H100)")


def llama3_runs(chunks=LLAMA3_CHOICE[0], micro_batch=LLAMA3_CHOICE[1]):
    """Llama 3 405B's three Table 4 rows as runs, at V = chunks and b = micro_batch."""
    runs = []
    for gpus, tp, cp, pp, dp, seq, per_dp, tflops, mfu in LLAMA3_TABLE4:
        shape = dataclasses.replace(LLAMA3_405B, seq_len=seq)
        layout = Layout(dp=dp, tp=tp, pp=pp, cp=cp, global_batch=dp * per_dp, micro_batch=micro_batch, chunks=chunks,
                        zero_stage=2, recompute="selective", sequence_parallel=True, schedule="llama3")
        runs.append({"name": f"Llama 3 405B, {gpus:,} GPUs, seq {seq:,}", "shape": shape,
                     "cluster": llama3_cluster(gpus), "layout": layout, "kv_heads": LLAMA3_KV_HEADS,
                     "grad_bytes": LLAMA3_GRAD_BYTES,
                     "reported_tflops": tflops, "reported_pct": mfu, "metric": "model_tflops_per_gpu",
                     "hardware": "H100", "source": "Llama Team 2024, Table 4"})
    return runs


def published_runs(llama_chunks=LLAMA3_CHOICE[0], llama_micro_batch=LLAMA3_CHOICE[1]):
    """The 13 runs as dicts: name, shape, cluster, layout, kv_heads, grad_bytes, reported figures, source, metric."""
    runs = []
    for row in MEGATRON_TABLE1:
        params, heads, h, L, tp, pp, gpus, batch, tflops, pct = row
        shape = memory.TransformerShape(n_layer=L, n_embd=h, n_head=heads, vocab_size=51200, seq_len=2048,
                                        ffn_hidden=4 * h, name=f"GPT {params}B")
        layout = Layout(dp=gpus // (tp * pp), tp=tp, pp=pp, global_batch=batch, recompute="full")
        runs.append({"name": f"Megatron GPT {params:g}B", "shape": shape, "cluster": selene(gpus), "layout": layout,
                     "kv_heads": None, "grad_bytes": 2, "reported_tflops": tflops, "reported_pct": pct,
                     "metric": "hardware_tflops_per_gpu", "hardware": "A100",
                     "source": "Narayanan et al. 2021, Table 1"})
    return runs + llama3_runs(llama_chunks, llama_micro_batch)


CALIBRATE = ("Megatron GPT 1.7B", "Llama 3 405B, 8,192 GPUs, seq 8,192")


def _predict(runs, calibrate, attention="full"):
    eff = {}
    for r in runs:
        if r["name"] in calibrate:
            eff[r["hardware"]] = fit_efficiency(r["shape"], r["cluster"], r["layout"], r["reported_tflops"],
                                                r["metric"], r["kv_heads"], r["grad_bytes"], attention)
    rows = []
    for r in runs:
        p = plan(r["shape"], r["cluster"], r["layout"], eff[r["hardware"]], r["kv_heads"], r["grad_bytes"],
                 attention=attention)
        pred = p[r["metric"]]
        rows.append({"name": r["name"], "source": r["source"], "hardware": r["hardware"],
                     "gpus": r["cluster"].gpus, "dp": r["layout"].dp, "tp": r["layout"].tp, "pp": r["layout"].pp,
                     "cp": r["layout"].cp, "chunks": r["layout"].chunks, "micro_batch": r["layout"].micro_batch,
                     "microbatches": p["microbatches"],
                     "calibration": r["name"] in calibrate, "efficiency": eff[r["hardware"]],
                     "reported_tflops": r["reported_tflops"], "predicted_tflops": pred,
                     "error": (pred - r["reported_tflops"]) / r["reported_tflops"],
                     "reported_pct": r["reported_pct"],
                     "predicted_pct": 100 * (p["hfu"] if r["metric"].startswith("hardware") else p["mfu"]),
                     "bubble_over_ideal": p["bubble_over_ideal"], "memory_gb": p["memory_per_gpu"] / 1e9,
                     "fits": p["fits"], "step_seconds": p["step_seconds"],
                     "time": p["time"]})
    return rows


def compare_published(calibrate=CALIBRATE, llama_chunks=LLAMA3_CHOICE[0], llama_micro_batch=LLAMA3_CHOICE[1],
                      attention="full"):
    """Fit one efficiency per GPU type on the named runs; predict every run -> list of rows."""
    return _predict(published_runs(llama_chunks, llama_micro_batch), calibrate, attention)


def llama3_sensitivity(chunks=LLAMA3_CHUNKS, micro_batches=LLAMA3_MICRO_BATCHES, attention="full"):
    """Llama 3's rows over the unknown V and b: for each pair, the efficiency fitted on the
    8,192-GPU row and the other rows' predictions -> list of dicts (one per V, b)."""
    out = []
    for v in chunks:
        for b in micro_batches:
            rows = _predict(llama3_runs(v, b), CALIBRATE, attention)
            out.append({"chunks": v, "micro_batch": b, "efficiency": rows[0]["efficiency"],
                        "bubble_pct": [100 * r["bubble_over_ideal"] for r in rows],
                        "error_pct": [100 * r["error"] for r in rows],
                        "fits": [r["fits"] for r in rows], "memory_gb": [r["memory_gb"] for r in rows]})
    return out


# ---------------------------------------------------------------------------
# A published mixture-of-experts run: DeepSeek-V3 (DeepSeek-AI 2024, arXiv 2412.19437)
#
# Section 4.2: 61 layers, width 7,168; MLA with 128 heads of 128 dims plus a 64-dim decoupled rope
# part for queries and keys; every FFN but the first three layers is an MoE layer of 1 shared and
# 256 routed experts of width 2,048, 8 routed experts per token, sent to at most 4 nodes; 671B
# parameters, 37B activated per token; sequences of 4K, batch raised to 15,360 sequences.
# Section 3.1-3.2: 2,048 H800 GPUs, 8 per node; 16-way pipeline, 64-way expert parallelism over
# 8 nodes, ZeRO-1 data parallelism; NVLink 160 GB/s, InfiniBand 50 GB/s (3.2.2); dispatch in FP8,
# combine in BF16 (3.3.3). Section 4.3 (and Table 1): 180K H800 GPU hours per trillion tokens.
# The planner models no all-to-all and no DualPipe, so it cannot predict this run; it computes
# what the reported figure implies. The H800's dense peaks are taken as the H100 SXM's (989 BF16,
# 1,979 FP8 teraFLOP/s): an assumption, not checked at NVIDIA.
DEEPSEEK_V3 = {"layers": 61, "width": 7168, "heads": 128, "qk_head_dim": 128 + 64, "v_head_dim": 128,
               "moe_layers": 61 - 3, "routed_experts": 256, "shared_experts": 1, "expert_width": 2048,
               "top_k": 8, "max_nodes_per_token": 4, "total_params": 671e9, "active_params": 37e9,
               "seq_len": 4096, "batch": 15360, "gpus": 2048, "gpus_per_node": 8, "pp": 16, "ep": 64,
               "nvlink_bytes_per_s": 160e9, "ib_bytes_per_s": 50e9, "gpu_hours_per_trillion_tokens": 180e3}
H800_PEAK_BF16 = H100_PEAK
H800_PEAK_FP8 = 1979e12


def deepseek_v3_implied(attention="full"):
    """DeepSeek-V3's reported GPU-hours per trillion tokens as throughput and utilisation -> dict."""
    from pylib.systems import moe
    d = DEEPSEEK_V3
    r = moe.implied_utilisation(d["gpu_hours_per_trillion_tokens"], d["active_params"], d["layers"], d["seq_len"],
                                d["heads"], d["qk_head_dim"], d["v_head_dim"], H800_PEAK_BF16, attention)
    r["mfu_fp8_peak"] = r["flops_per_gpu_s"] / H800_PEAK_FP8
    r["dp"] = d["gpus"] // d["pp"]  # GPUs per pipeline stage, data-parallel for attention
    r["experts_per_gpu"] = d["routed_experts"] // d["ep"]
    r["ib_bytes_per_token_layer"] = moe.dispatch_combine_bytes_per_token(d["width"], d["max_nodes_per_token"])
    return r
