"""Benchmark and evaluation harness for transformer positional encodings."""
__version__ = "0.1.0"
