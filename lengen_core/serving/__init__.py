"""The serving side of the lab: what stands between the science and its users.

    store             runs on disk: atomic, checksummed, bounded by a quota; the presets read-only
    jobs              the training pool: a queue, one training per browser, wall-clock limits
    training_process  a training in a child process of its own, with an address-space limit
    stepping          pause, single-step and resume for a live training
    budget            what a request costs, checked against the operator's budgets before work
    share             links to and from configs and views, run archives
    runtime           process settings (the heap's mmap threshold) and the CPUs this process may use
    cli               `python -m lengen_core`

The science (config, frequencies, tasks, models/, analysis/, training, optimisation) never imports
from here; `tests/unit/test_purity.py` and `tests/unit/test_layers.py` check it.
"""
