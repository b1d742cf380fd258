"""The chapters' studies: small experiments built on the trainable core (model, train, optim, ...).

One module per topic, named for what it studies: the narrow valley and Adam's first steps
(quadratic, adam_trace), the objective and multi-token prediction (objective, mtp), data
mixtures and deduplication (mixture, dedup), the gradient check (gradcheck), learning-rate
ladders and the gradient noise scale (lr_sweep, noise_scale), initialisation and muP
(init_study), optimiser state (optim_state), stability (stability) and the step benchmark
(benchmark). They import the core; the core never imports them.
"""
