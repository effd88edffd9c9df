"""Benchmarks: run one with ``.venv/bin/python -m bench.<name>``; results go in docs/benchmarks.md."""
