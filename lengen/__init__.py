"""lengen: the application layer of the lab, between the science (lengen_core) and its clients (the
app's ui/ and pages/, the command line, a notebook). It owns what is not science:

    store             runs on disk: atomic, checksummed, bounded by a quota; the presets read-only
    jobs              the training pool: a queue, one training per browser, wall-clock limits
    training_process  a training in a child process of its own, with an address-space limit
    ray_pool          the same pool on a Ray cluster (an optional install)
    stepping          pause, single-step and resume for a live training
    budget            what a request costs, checked against the operator's budgets before work
    first_visit       the default request: what a run's pages open with, measured where it trained
    share             links to and from configs and views, run archives
    sweep             grids of runs, on local processes or Ray
    runtime           process settings (the heap's mmap threshold) and the CPUs this process may use
    cli               `python -m lengen`

The layers: pages → ui → lengen → lengen_core (models → analysis); nothing imports upward
(tests/unit/test_layers.py, tests/unit/test_purity.py).
"""
