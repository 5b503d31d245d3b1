"""Benchmarks that replay chat sessions through the real components; run them as modules (see README "Benchmark")."""
