"""muP's per-tensor learning rates (chapter 7), as a rule over parameter groups.

Under muP with Adam, a hidden matrix's learning rate is the base rate divided by the width
multiplier (Yang et al. 2022, Tensor Programs V, Table 3; pylib.model.lr_multipliers). As
torch.optim's parameter groups and mup's MuAdam do it, the tensors that share a multiplier form
one group, and each group is stepped by the unchanged optimiser (pylib.optim.adamw_step, or any
step with the same signature) with its own state and learning rate lr * mult.

Weight decay: the optimiser's decoupled decay is lr * wd, so it scales with the multiplier too.
constant_decay=True divides wd by the multiplier instead, so every tensor decays by the base
model's lr * wd: what mup's MuAdam/MuAdamW do by default (decoupled_wd=False multiplies wd by the
width multiplier where it divides lr).
"""

# ---------------------------------------------------------------------------


def lr_groups(lr_mult):
    """{multiplier: names of the tensors with it}, each list in the params' order."""
    groups = {}
    for name, mult in lr_mult.items():
        groups.setdefault(float(mult), []).append(name)
    return groups


def grouped_init(init, params, lr_mult):
    """One optimiser state per group, from init (e.g. pylib.optim.adamw_init) on the group's tensors."""
    return {f"x{mult:g}": init({n: params[n] for n in names}) for mult, names in lr_groups(lr_mult).items()}


def grouped_step(step, params, grads, states, lr, lr_mult, weight_decay=0.0, constant_decay=False, **hyper):
    """One step of `step` (e.g. pylib.optim.adamw_step) on each group, at lr * its multiplier."""
    for mult, names in lr_groups(lr_mult).items():
        wd = weight_decay / mult if constant_decay else weight_decay
        step({n: params[n] for n in names}, {n: grads[n] for n in names}, states[f"x{mult:g}"], lr * mult,
             weight_decay=wd, **hyper)
