"""What the test modules share (a test module never imports another test module).

    browser        the browser tests' chromium, screenshot folder, `settle`, `open_page`, `check_and_shoot`
    serving        the app served for the e2e tests: from the checkout, or as the container serves it
    load_probe     the load test's observers, run as processes of their own (`python -m tests.helpers.load_probe`)
    cli            the command line run in-process (`run_cli`, `ok_json`, `assert_user_error`)
    panel          the prediction panel's configs, which other tests train again (and share: `trained`)
    example_counts how many examples a property test whose every example runs a model gets
    causal_inputs  token pairs that differ only after t, for the causality properties

Imported as `tests.helpers.<module>` (pytest.ini puts the repository root on the path). Nothing here
imports playwright or torch at import time unless the module itself needs it.
"""
