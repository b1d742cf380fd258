"""The course's experiments, one module per chapter (chN.py), run by `python build.py --measure`.

Each module has `run(corpus) -> {"values", "curves", "settings", "timings"}` (every part optional;
keys are prefixed "chN.") and `markdown(results) -> list of lines` for its section of results.md.
Everything but "timings" must be a deterministic function of the code, the corpus and the seeds.
"""
