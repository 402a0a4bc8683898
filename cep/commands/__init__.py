"""Implementations of the ``cep`` subcommands (``check``, ``explain``), callable from tests.

Each ``run_*`` function takes the output streams and returns the exit code, so
the click layer (``cep.cli``) stays a thin wrapper.
"""
