"""Exit statuses of every ``cep`` command (``run``, ``check``, ``explain``, ``spark``).

Why one module: scripts branch on these numbers, so every command must mean the
same thing by them (docs/language.md, "The command line").  2 always means
"fix the pattern"; usage errors are 1, not click's 2, for that reason.
"""

EXIT_OK = 0
EXIT_OTHER = 1  # usage errors, unreadable files, unreachable brokers, internal errors
EXIT_PATTERN = 2  # a pattern error: FILE:LINE:COL messages on stderr
EXIT_RECORD = 3  # a bad input record (``--on-error fail``)
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it
EXIT_SIMULATED_CRASH = 75  # test hook only: ``cep run --test-stop-after N --test-crash-at-stop``
