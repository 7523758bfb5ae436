"""Benchmarks of issue 6 (lengen against TransformerLens, and the app's waiting times).

Run with `python -m bench` or `bash bench/run.sh`; never as timed unit tests. See bench/README.md.
"""
