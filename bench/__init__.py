"""Benchmarks: each prints a table and ratios against a baseline measured in the same run."""
