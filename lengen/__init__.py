"""lengen: the application layer of the lab, between the science (lengen_core) and its clients (the
app's ui/ and pages/, the command line, a notebook). It owns what is not science:

    store             runs on disk: atomic, checksummed, bounded by a quota; the presets read-only
      run_files         one run's directory: its files, their format, written and read back checked
      store_writers     several writers of one store: its lock, temp names naming their writer, leftovers
      store_quota       a store's bounds: a run's size, whether it fits, eviction past the quota
    jobs              the training pool: budgets checked, then queued; the parts below composed
      job               one training request: its holders, step gate, pause clock, progress, status
      job_queue         tickets, identical requests merged, first in first out, owners' limits, pauses
      pool_workers      worker threads, their training processes, calibration, the wall-clock limit
    training_process  a training in a child process of its own, with an address-space limit
    ray_pool          the same pool on a Ray cluster (an optional install)
    stepping          pause, single-step and resume for a live training
    budget            what a request costs, checked against the operator's budgets before work
    first_visit       the default request: what a run's pages open with, measured where it trained
    share             links to and from configs and views, run archives
    sweep             grids of runs, on local processes or Ray
    runtime           process settings (the heap's mmap threshold) and the CPUs this process may use
    cli               `python -m lengen`
    results           what each command of the command line answers, as JSON or as text
    api               the lab's public Python API for a script or a notebook

The layers: pages → ui → lengen → lengen_core (models → analysis); nothing imports upward
(tests/unit/test_layers.py, tests/unit/test_purity.py).
"""
