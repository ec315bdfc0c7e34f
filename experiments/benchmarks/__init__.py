"""Speed and quality benchmarks: scripts that print figures, run as python -m experiments.benchmarks.NAME."""
