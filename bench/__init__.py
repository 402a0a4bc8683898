"""Benchmarks: the thesis Q1-Q12, the CEP patterns and a selectivity sweep, cep side by side with Esper."""
