"""The pattern grammar (``pattern.lark``), installed as ``cep.grammar`` package data."""
