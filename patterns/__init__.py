"""The shipped patterns (``*.pattern``), installed as ``cep.patterns`` package data."""
