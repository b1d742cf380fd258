"""Chapter 9's exercises: a lost update, bfloat16's bits, dynamic loss scaling, and one step in a
lower precision (pylib.exercises says how checks work)."""

import math

import numpy as np

from pylib import data, model, optim, train
from pylib.exercises import Exercise, Mistake, Wrong, corpus, expect_number, near
from pylib.systems import mixed_precision, precision

# ---------------------------------------------------------------------------
# 1. Predict: a bfloat16 weight, many small additions

LOST = {"start": 1.0, "increment": 0.005, "n": 1000}


def lost_update_final():
    """The bfloat16 weight (rounded to nearest) after LOST's additions (pylib.systems.precision)."""
    return float(precision.repeated_add(LOST["start"], LOST["increment"], LOST["n"], "bf16")[-1, 0])


def check_lost_update_final(value, truth):
    exact = LOST["start"] + LOST["n"] * LOST["increment"]
    spacing = precision.spacing_at_one("bf16") * LOST["start"]
    if near(value, exact, 0.01):
        raise Wrong("That is the exact sum, which a float32 weight nearly reaches. In bfloat16 every addition is "
                    "rounded to the nearest value the format holds.")
    if near(value, LOST["start"], 0.01):
        raise Wrong(f"The first addition is not lost: {LOST['increment']:g} is more than half of bfloat16's spacing "
                    f"at {LOST['start']:g}, so the sum rounds up to the next value, not back.")
    if near(value, LOST["start"] + LOST["n"] * spacing, 0.01):
        raise Wrong("Each addition does land one spacing up, but not for ever: the spacing is relative, and it "
                    "doubles at every power of two.")


# ---------------------------------------------------------------------------
# 2. Implement: float32 to bfloat16 bits, round to nearest even, on the uint32 view

BF16_STARTER = '''import numpy as np


def round_bf16(x):
    """x (a float32 array) rounded to the nearest bfloat16, ties to even, as bfloat16 bit patterns.

    Returns a uint16 array of x's shape: each element's sign bit, 8 exponent bits and 7 mantissa
    bits, as a bfloat16 tensor stores them. Work on the uint32 view of x (x.view(np.uint32)).
    Past the largest bfloat16 the result is infinity; a NaN stays a NaN.
    """
    raise NotImplementedError
'''

BF16_SOLUTION = '''import numpy as np


def round_bf16(x):
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    kept_lsb = (bits >> 16) & 1  # the last bit bfloat16 keeps: it decides a tie, towards even
    rounded = (bits + 0x7FFF + kept_lsb) >> 16  # a carry runs on into the exponent
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    rounded = np.where(nan, (bits >> 16) | 0x0040, rounded)  # a NaN stays a (quiet) NaN
    return rounded.astype(np.uint16)
'''


def _bf16_reference(x):
    """pylib's round_to(x, "bf16") (ml_dtypes' cast, bit for bit), as uint16 patterns."""
    return (precision.round_to(x, "bf16").view(np.uint32) >> np.uint32(16)).astype(np.uint16)


def _f32(bits):
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def _bf16_cases():
    """{name: float32 array}: random values, every bfloat16 value, every tie and its neighbours, limits."""
    rng = np.random.default_rng(9)
    every = np.arange(1 << 16, dtype=np.uint32)
    finite = every[(every & 0x7F80) != 0x7F80]  # exponent not all ones
    scales = 2.0 ** rng.integers(-130, 128, 20000)
    random = (rng.uniform(-1, 1, 20000) * scales).astype(np.float32)
    special = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000,  # zeros, infinities
               0x7F7F0000, 0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF,  # the largest bf16, under, at and past its tie
               0x00000001, 0x00008000, 0x00018000, 0x007FFFFF, 0x807FFFFF]  # subnormals and the carry out of them
    return {
        "random": random,
        "every bfloat16 value": _f32(every[((every & 0x7F80) != 0x7F80)] << np.uint32(16)),
        "ties": _f32((finite << np.uint32(16)) | np.uint32(0x8000)),
        "near ties": _f32(np.concatenate([(finite << np.uint32(16)) | np.uint32(0x7FFF),
                                          (finite << np.uint32(16)) | np.uint32(0x8001)])),
        "limits": _f32(np.array(special, dtype=np.uint32)),
        "NaN": _f32(np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0x7F808000, 0x7FFFFFFF, 0xFFFFFFFF, 0xFF800001],
                             dtype=np.uint32)),
    }


def _bits_of(fn, x, what):
    got = fn(x.copy())
    if not isinstance(got, np.ndarray):
        raise Wrong(f"round_bf16 should return a NumPy array of uint16 bit patterns; yours returns a "
                    f"{type(got).__name__}.")
    if got.shape != x.shape:
        raise Wrong(f"round_bf16 should keep x's shape {x.shape}; yours returns {got.shape}.")
    if got.dtype.kind == "f":
        raise Wrong("Your function returns floating-point values; the task asks for the bfloat16 bit patterns "
                    "themselves, 16-bit unsigned integers (the top half of a float32's bits, once rounded).")
    if got.dtype.kind not in "ui" or (got.size and (got.min() < 0 or got.max() > 0xFFFF)):
        raise Wrong(f"Your bit patterns should be 16-bit unsigned integers (0 to 65535); yours are {got.dtype} "
                    f"values from {got.min()} to {got.max()}.")
    return got.astype(np.uint16)


_LIBRARY = "Your answer uses pylib's rounding (or ml_dtypes): the exercise is to do it yourself, on the bits, " \
           "which is what the check compares with them."


def _refuse_library_rounding(fn):
    """The answer must do the rounding itself: refuse a function whose code names pylib's rounding or
    ml_dtypes, and (through _without_library) one that calls pylib's rounding through its module."""
    code = getattr(fn, "__code__", None)
    names = set(code.co_names) if code else set()
    for name in names:
        value = getattr(fn, "__globals__", {}).get(name)
        if value in (precision.round_to, precision.round_stochastic, mixed_precision.round_tensor) or \
                str(getattr(value, "__name__", "")).startswith("ml_dtypes") or \
                str(getattr(value, "__module__", "")).startswith("ml_dtypes"):
            raise Wrong(_LIBRARY)

    def guarded(x):
        real = precision.round_to, precision.round_stochastic, mixed_precision.round_tensor

        def refuse(*args, **kwargs):
            raise Wrong(_LIBRARY)

        precision.round_to = precision.round_stochastic = mixed_precision.round_tensor = refuse
        try:
            return fn(x)
        finally:
            precision.round_to, precision.round_stochastic, mixed_precision.round_tensor = real

    return guarded


def check_round_bf16(fn):
    fn = _refuse_library_rounding(fn)
    cases = _bf16_cases()
    for name in ("every bfloat16 value", "random", "near ties", "ties", "limits"):
        x = cases[name]
        got, want = _bits_of(fn, x, name), _bf16_reference(x)
        if np.array_equal(got, want):
            continue
        bits = x.view(np.uint32)
        truncated = (bits >> np.uint32(16)).astype(np.uint16)
        wrong = got != want
        negative = (bits >> np.uint32(31)).astype(bool)
        if not np.any(wrong & ~negative):
            raise Wrong(f"Right for positive numbers, wrong for {int(np.count_nonzero(wrong))} negative ones: the "
                        "sign bit goes through unchanged, and the rounding is on the magnitude.")
        if np.all(want[wrong] & np.uint16(0x7FFF) == 0x7F80) and np.all(got[wrong] & np.uint16(0x7FFF) == 0x7F7F):
            raise Wrong("You saturate: past the overflow threshold (the largest bfloat16 plus half its spacing) the "
                        "cast gives infinity, as ml_dtypes' and round_to do, not the largest finite value.")
        if name == "every bfloat16 value":
            i = int(np.argmax(wrong))
            raise Wrong(f"{float(x[i]):.9g} is a bfloat16 value already, so it must come back as it is (bits "
                        f"{int(want[i]):#06x}); yours gives {int(got[i]):#06x}.")
        tie = (bits & np.uint32(0xFFFF)) == 0x8000  # exactly halfway between two bfloat16s
        magnitude = lambda b: b & np.uint16(0x7FFF)  # noqa: E731
        if np.all(tie[wrong]) and np.all(magnitude(got[wrong]) > magnitude(want[wrong])):
            raise Wrong("Your ties always go up (away from zero), as in rounding half up: a value exactly halfway "
                        "between two bfloat16s goes to the one whose last kept bit is 0, the even one.")
        if np.all(tie[wrong]) and np.all(magnitude(got[wrong]) < magnitude(want[wrong])):
            raise Wrong("Your ties always go down (towards zero): a value exactly halfway between two bfloat16s goes "
                        "to the even one, the one whose last kept bit, bit 16 of the float32, is 0.")
        if np.array_equal(got[wrong], truncated[wrong]):
            raise Wrong("You truncate: you drop the low 16 bits, so a value three quarters of the way to the next "
                        "bfloat16 comes out one step low. Round to the nearest instead.")
        i = int(np.argmax(wrong))
        raise Wrong(f"Wrong on {int(np.count_nonzero(wrong))} of {x.size} {name} (for example x = "
                    f"{float(x[i]):.9g}, float32 "
                    f"bits {int(bits[i]):#010x}: yours gives {int(got[i]):#06x}).")
    x = cases["NaN"]
    got = _bits_of(fn, x, "NaN")
    is_nan = ((got & 0x7F80) == 0x7F80) & ((got & 0x007F) != 0)
    if not is_nan.all():
        i = int(np.argmin(is_nan))
        what = "infinity" if (got[i] & 0x7FFF) == 0x7F80 else f"the bits {int(got[i]):#06x}, not a NaN"
        raise Wrong(f"The NaN with float32 bits {int(x.view(np.uint32)[i]):#010x} came out as {what}: when its "
                    "payload is all in the dropped bits, or the rounding carries out of it, the bit trick turns a "
                    "NaN into something else. Find the NaNs first and keep them NaN.")
    return ("Right: every bfloat16 value comes back unchanged, and every tie, every float32 step either side of "
            "a tie, random values over the whole range, the subnormals, the largest value, the overflow to "
            "infinity and the NaNs match pylib's round_to (ml_dtypes' cast) bit for bit.")


# ---------------------------------------------------------------------------
# 3. Predict: where dynamic loss scaling ends

SCALING = {"steps": 300, "overflows": (30, 130, 131)}


def final_loss_scale():
    """s after SCALING's run, from pylib's DynamicLossScaler with the course's settings."""
    scaler = mixed_precision.DynamicLossScaler()
    for step in range(SCALING["steps"]):
        scaler.update(step in SCALING["overflows"])
    return scaler.scale


def _scale_variant(reset=True, skipped_clean=False, grow=True, halve=True):
    """The scale a wrong reading of the rule gives (for the check's messages)."""
    cfg = mixed_precision.SCALER
    s, clean = cfg["init_scale"], 0
    for step in range(SCALING["steps"]):
        if step in SCALING["overflows"]:
            s *= cfg["backoff_factor"] if halve else 1.0
            if skipped_clean:
                clean += 1
            elif reset:
                clean = 0
        else:
            clean += 1
        if clean == cfg["growth_interval"]:
            s *= cfg["growth_factor"] if grow else 1.0
            clean = 0
    return s


def _scale_story():
    """The worked answer: the run as stretches of clean steps and overflows, with log2 s after each."""
    cfg = mixed_precision.SCALER
    n, over, steps = cfg["growth_interval"], sorted(SCALING["overflows"]), SCALING["steps"]
    log2 = math.log2(cfg["init_scale"])
    parts, clean, start = [], 0, 0
    for stop in over + [steps]:
        run = stop - start  # clean steps from start to stop - 1
        if run:
            doublings = (clean + run) // n
            clean = (clean + run) % n
            log2 += doublings
            parts.append(f"steps {start}–{stop - 1} are {run} clean in a row ({doublings} doubling"
                         f"{'' if doublings == 1 else 's'}, s = 2^{log2:.0f}, {clean} counted towards the next)")
        if stop < steps:
            log2 -= 1
            clean = 0
            parts.append(f"the overflow at step {stop} halves s to 2^{log2:.0f} and restarts the count")
        start = stop + 1
    return (f"Follow the count of clean steps in a row, and log₂ s, from {math.log2(cfg['init_scale']):.0f}: "
            + "; ".join(parts) + f". The run ends at s = 2^{log2:.0f} = {2.0 ** log2:,.0f}.")


def check_final_loss_scale(value, truth):
    n = mixed_precision.SCALER["growth_interval"]
    if near(value, _scale_variant(reset=False), 0.02):
        raise Wrong(f"s doubles after {n} clean steps in a row: an overflow starts the count again from zero.")
    if near(value, _scale_variant(skipped_clean=True), 0.02):
        raise Wrong(f"A skipped step is not a clean one: s doubles after {n} clean steps, not every {n} steps.")
    if near(value, _scale_variant(grow=False), 0.02):
        raise Wrong(f"s does not only fall: after {n} clean steps in a row it doubles again.")
    if near(value, _scale_variant(halve=False), 0.02):
        raise Wrong("Each overflow halves s (and skips the step): it is how the scaler comes back into "
                    "float16's range.")


# ---------------------------------------------------------------------------
# 4. Investigate: one step in another precision, against float32

ONE_STARTER = '''from pylib import model
from pylib.systems import mixed_precision


def one_step(params, cfg, x, y):
    """Change one condition of the step: its precision. Return (logits, loss, grads).

    The unchanged step is float32, the recipe "fp32"; mixed_precision.RECIPES holds the chapter's others.
    """
    rec = mixed_precision.RECIPES["fp32"]  # change this line only
    with mixed_precision.matmul_rounding(rec):
        logits = model.forward(params, cfg, x)[0]
    loss, grads = mixed_precision.loss_and_grads(params, cfg, x, y, rec)
    return logits, loss, grads
'''

ONE_SOLUTION = ONE_STARTER.replace('RECIPES["fp32"]  # change this line only', 'RECIPES["bf16_master"]')


def _one_setting():
    cfg, tcfg = model.GPTConfig(), train.TrainConfig()
    x, y = data.eval_windows(corpus().val, tcfg.batch_size, cfg.block_size)  # the chapter's fixed batch
    return cfg, tcfg, model.init_params(cfg, tcfg.seed), x, y


def _fp32_step(params, cfg, x, y):
    logits = model.forward(params, cfg, x)[0]
    loss, grads = mixed_precision.loss_and_grads(params, cfg, x, y, mixed_precision.RECIPES["fp32"])
    return logits, loss, grads


def _update(params, grads, tcfg):
    """One clip-and-AdamW step from fresh optimiser state, as the run's first: the change of the weights."""
    p = {k: v.copy() for k, v in params.items()}
    g = {k: v.copy() for k, v in grads.items()}
    optim.clip_grad_norm(g, tcfg.grad_clip)
    optim.adamw_step(p, g, optim.adamw_init(p), tcfg.lr_at(0), tcfg.beta1, tcfg.beta2, tcfg.eps,
                     tcfg.weight_decay, optim.param_groups(p))
    return np.concatenate([(p[k] - params[k]).ravel() for k in grads])


def _spy_recipe(fn):
    """Call fn, recording the recipe and loss scale it gives mixed_precision.loss_and_grads."""
    seen = []
    real = mixed_precision.loss_and_grads

    def spy(params, cfg, x, y, rec, loss_scale=1.0, counts=None):
        seen.append((rec, loss_scale))
        return real(params, cfg, x, y, rec, loss_scale, counts)

    def wrapped(*args):
        mixed_precision.loss_and_grads = spy
        try:
            return fn(*args), seen
        finally:
            mixed_precision.loss_and_grads = real

    return wrapped


def check_one_step(fn):
    cfg, tcfg, params, x, y = _one_setting()
    logits32, loss32, grads32 = _fp32_step(params, cfg, x, y)
    out, seen = _spy_recipe(fn)({k: v.copy() for k, v in params.items()}, cfg, x.copy(), y.copy())
    if not (isinstance(out, tuple) and len(out) == 3 and isinstance(out[2], dict)):
        raise Wrong("one_step should return (logits, loss, grads), as the starter does.")
    logits, loss, grads = np.asarray(out[0]), expect_number(out[1], "The loss"), out[2]
    if logits.shape != logits32.shape:
        raise Wrong(f"The logits should have shape {logits32.shape}; yours have {logits.shape}.")
    if set(grads) != set(grads32) or any(np.shape(grads[k]) != grads32[k].shape for k in grads32):
        raise Wrong("Your grads do not have the model's parameter names and shapes.")
    if not seen:
        raise Wrong("Your function did not call mixed_precision.loss_and_grads: keep the starter's call, whose "
                    "recipe the check reads to set the tolerances.")
    rec, scale = seen[-1]
    g32 = np.concatenate([grads32[k].ravel() for k in grads32]).astype(np.float64)
    g = np.concatenate([np.asarray(grads[k], dtype=np.float64).ravel() for k in grads32])
    logits_same = np.array_equal(logits, logits32)
    if logits_same and np.array_equal(g, g32):
        raise Wrong("Your step is the float32 step, bit for bit: the recipe is still fp32. Change the precision.")
    if not np.all(np.isfinite(g)):
        raise Wrong("Some of your gradients are not finite (inf or NaN): did a scaled gradient overflow?")
    if logits_same and rec.forward != "fp32" and not np.array_equal(g, g32):
        raise Wrong("Your logits are float32's, bit for bit, but your gradients are not: the forward pass that "
                    "gives the logits must run in the changed precision too, inside matmul_rounding.")
    if not logits_same and np.array_equal(g, g32):
        raise Wrong("Your logits changed but your gradients are float32's, bit for bit: the backward pass must run "
                    "in the changed precision too.")
    tol = mixed_precision.one_step_tolerances(cfg, rec)
    rel = mixed_precision.rel_error
    grads_rel = rel(g, g32)
    if scale != 1.0 and abs(np.linalg.norm(g) / np.linalg.norm(g32) - scale) < 0.01 * scale:
        raise Wrong(f"Your gradients are s = {scale:g} times float32's: the loss was scaled, and the gradients must "
                    "be divided by s again (DynamicLossScaler.unscale_) before anything uses them.")
    logits_rel = rel(logits, logits32)
    names = f"{precision.NAMES[rec.forward]} forward"
    if logits_rel > tol["tolerance_logits"]:
        raise Wrong(f"Your logits differ from float32's by {logits_rel:.3g} (relative), more than the tolerance of "
                    f"a {names}, {tol['tolerance_logits']:.3g}: more rounding than the recipe's formats allow.")
    if grads_rel > tol["tolerance_grads"]:
        flushed = float(np.mean((g == 0) & (g32 != 0)))
        extra = (f" A share {flushed:.3g} of the gradient elements became zero: they underflowed."
                 if flushed > 0.01 else "")
        raise Wrong(f"Your gradients differ from float32's by {grads_rel:.3g} (relative), more than the recipe's "
                    f"tolerance, {tol['tolerance_grads']:.3g}.{extra}")
    up, up32 = _update(params, grads, tcfg), _update(params, grads32, tcfg)
    flipped = np.sign(up) != np.sign(up32)
    unresolved = np.abs(g32) <= np.abs(g - g32)
    flips = int(np.count_nonzero(flipped & ~unresolved))
    if flips:
        raise Wrong(f"{flips} update elements flipped sign where the gradient's sign was resolved (its float32 value "
                    "larger than the rounding's change of it): rounding alone cannot do that.")
    name = next((k for k, v in mixed_precision.RECIPES.items() if v == rec), None)
    name = f"the recipe {name}" if name else f"your recipe (forward {rec.forward}, gradients {rec.grad})"
    flushed = float(np.mean((g == 0) & (g32 != 0)))
    flushed = f" Rounding flushed {flushed:.2%} of the gradient elements to zero." if flushed else ""
    return (f"Right, for {name}: "
            f"the logits differ from float32's by {logits_rel:.2e} (tolerance {tol['tolerance_logits']:.2e}), the "
            f"loss by {abs(loss - loss32):.2e} nats, the gradients by {grads_rel:.2e} (tolerance "
            f"{tol['tolerance_grads']:.2e}). The update differs by {rel(up, up32):.3g}, far more: Adam's first step "
            f"is about lr·sign(g), and {float(np.mean(flipped)):.2%} of its elements changed sign, every one of "
            f"them where the gradient's sign was unresolved ({float(np.mean(unresolved)):.2%} of the "
            f"elements).{flushed}")


# ---------------------------------------------------------------------------

EXERCISES = [
    Exercise(
        id="ch9.lost_update_final", kind="predict", title="Where the increments stop",
        task=f"""A weight stored in bfloat16 starts at {LOST['start']:g}, and {LOST['n']:,} times an optimiser adds
{LOST['increment']:g} to it, rounding the sum to the nearest bfloat16 each time. What value does the weight
end at? Commit a number; the check runs the additions.""",
        truth=lost_update_final, check=check_lost_update_final, tolerance=0.01,
        solution=f"""At {LOST['start']:g} the spacing of bfloat16 is 2^−{precision.FORMATS['bf16'][1]} =
{precision.spacing_at_one('bf16'):g}, and {LOST['increment']:g} is more than half of it, so each sum rounds
*up*, to the next value: the weight climbs one spacing per step, faster than the exact sum. At the next
power of two the spacing doubles, to {2 * precision.spacing_at_one('bf16'):g}; now {LOST['increment']:g} is
less than half of it, every sum rounds back, and the weight stays at that power of two for good. The exact
sum, which float32 nearly reaches, is {LOST['start'] + LOST['n'] * LOST['increment']:g}.""",
        hints=(f"Compare the increment with half the spacing at the weight's current value; the spacing at 1 is "
               f"2^−{precision.FORMATS['bf16'][1]}.",
               "The spacing is relative: it doubles at every power of two."),
        mistakes=(Mistake(repr(LOST["start"] + LOST["n"] * LOST["increment"]), "exact sum"),
                  Mistake(repr(LOST["start"]), "first addition is not lost"),
                  Mistake(repr(LOST["start"] + LOST["n"] * precision.spacing_at_one("bf16")), "doubles at every power"),
                  ),
    ),
    Exercise(
        id="ch9.round_bf16", kind="implement", title="bfloat16's bits",
        task="""The chapter's `round_to` rounds to any format and returns float32 values. Write the cast a
bfloat16 tensor actually does: from a float32 array to the 16-bit patterns it stores, rounded to nearest
with ties to even, on the uint32 view. The check compares your bits with pylib's (which match ml_dtypes') on
every bfloat16 value, every tie, the float32 steps either side of each tie, the limits and NaN.""",
        starter=BF16_STARTER, function="round_bf16", solution=BF16_SOLUTION, check=check_round_bf16,
        hints=("bfloat16 is the top 16 bits of a float32. Rounding to nearest means adding half of the dropped "
               "part's unit, 0x8000, before dropping the low 16 bits; a carry moves into the exponent, as it should.",
               "A tie (low bits exactly 0x8000) must go to the even neighbour: add 0x7FFF plus the last kept bit, "
               "bit 16, instead of 0x8000.",
               "NaN has an all-ones exponent and a non-zero mantissa; if its only set bits are the dropped ones, "
               "the rounding makes it infinity. Find the NaNs first (|bits| > 0x7F800000)."),
        mistakes=(
            Mistake(BF16_SOLUTION.replace("rounded = (bits + 0x7FFF + kept_lsb) >> 16", "rounded = bits >> 16"),
                    "You truncate"),
            Mistake(BF16_SOLUTION.replace("(bits + 0x7FFF + kept_lsb)", "(bits + 0x8000)"), "always go up"),
            Mistake(BF16_SOLUTION.replace("kept_lsb = (bits >> 16) & 1", "kept_lsb = bits & 1"), "always go down"),
            Mistake(BF16_SOLUTION.replace("    rounded = np.where(nan, (bits >> 16) | 0x0040, rounded)", ""),
                    "came out as infinity"),
        )),
    Exercise(
        id="ch9.final_loss_scale", kind="predict", title="Where the loss scale ends",
        task=f"""A float16 run uses the course's dynamic loss scaler: it starts at
s = 2^{math.log2(mixed_precision.SCALER['init_scale']):.0f}, halves on an overflow (and skips that step), and
doubles after {mixed_precision.SCALER['growth_interval']} clean steps in a row. The run has
{SCALING['steps']} steps, numbered from 0, and its scaled gradients overflow at steps
{', '.join(map(str, SCALING['overflows'][:-1]))} and {SCALING['overflows'][-1]}, and nowhere else. What is s
after the last step? (Type it as a number, like 4096 or 4.1e3.)""",
        truth=final_loss_scale, check=check_final_loss_scale, tolerance=0.05,
        solution=_scale_story(),
        hints=("Count the clean steps in a row between the overflows; an overflow sets the count back to zero.",
               f"Track log₂ s: −1 per overflow, +1 per {mixed_precision.SCALER['growth_interval']} clean steps in "
               "a row."),
        mistakes=(Mistake(repr(_scale_variant(reset=False)), "starts the count again"),
                  Mistake(repr(_scale_variant(skipped_clean=True)), "skipped step is not a clean one"),
                  Mistake(repr(_scale_variant(grow=False)), "does not only fall"),
                  Mistake(repr(_scale_variant(halve=False)), "Each overflow halves s"),
                  ),
    ),
    Exercise(
        id="ch9.one_step_precision", kind="investigate", title="One condition changed: the precision",
        task="""Take the chapter's one-step comparison and run it yourself: the initial weights, the fixed batch,
one forward and one backward pass. Change one condition, the precision, to one of the chapter's recipes
(bf16 compute with float32 master weights, say). The check compares your logits, gradients and the
AdamW update with the float32 step's, with the chapter's three tolerances for the recipe you chose.""",
        starter=ONE_STARTER, function="one_step", solution=ONE_SOLUTION, check=check_one_step, needs_corpus=True,
        hints=("The recipes' names are the keys of `mixed_precision.RECIPES` (`print(list(mixed_precision.RECIPES))` "
               "shows them); the module's docstring says where each one rounds.",
               "A recipe with loss scaling multiplies the gradients by s if you pass loss_scale; they must be "
               "divided by s again before you return them."),
        mistakes=(
            Mistake(ONE_STARTER, "the recipe is still fp32"),
            Mistake(ONE_SOLUTION.replace('''    with mixed_precision.matmul_rounding(rec):
        logits = model.forward(params, cfg, x)[0]''', '''    logits = model.forward(params, cfg, x)[0]'''),
                    "inside matmul_rounding"),
            Mistake(ONE_STARTER.replace('RECIPES["fp32"]  # change this line only', 'RECIPES["fp16_dynamic"]').replace(
                "x, y, rec)", "x, y, rec, loss_scale=mixed_precision.SCALER[\"init_scale\"])"), "divided by s again"),
        )),
]
