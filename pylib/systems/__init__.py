"""Models of the machine a run lives on: numerics and systems.

What training costs in memory, precision and communication, computed from the model's config
and simulated on its real tensors: activation and training memory (memory). The second half's
simulators (number formats, collectives, pipelines) live here too. They import the core; the
core never imports them.
"""
