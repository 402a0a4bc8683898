"""The ``cep`` command: ``run``, ``check``, ``explain``, ``patterns`` and ``spark`` (docs/language.md section 6).

Why a thin layer: each command only maps options onto a function that does
the work (``cep.commands.run.run``, ``cep.commands.check.run_check``,
``cep.commands.explain.run_explain``, ``cep.connectors.spark_cli.main``) and turns
its result into an exit status.  Statuses: 0 ok, 2 pattern errors, 3 bad input
record, 1 anything else -- including usage errors, so that 2 always means "fix
the pattern".  No traceback reaches the user unless ``CEP_DEBUG=1``.

The commands are click commands (``cep.cli_click``).  Why this module does not import
click (issue 15): on a short stream start-up decides the run, and importing click was
a tenth of a 13-record ``cep run``.  A ``cep run`` whose arguments are plain (known
options, each once as ``--name VALUE`` or a flag, valid values, pattern files or names)
is read here, into the very options click would give; anything else -- help, a usage
error, ``--opt=value``, another command -- goes to click, which says what it always says.
``tests/test_cli_fast.py`` holds the two readings equal.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from typing import Any

from cep.exit_codes import EXIT_INTERRUPTED, EXIT_OK, EXIT_OTHER
from cep.lazyre import lazy

# ``cep run``'s options as click declares them (cep.cli_click.run_cmd): option -> (parameter, kind);
# kinds: "str", "flag", ("choice", values), ("int", minimum), ("float", minimum)
_FORMATS = ("jsonl", "csv")
_ON_ERROR = ("fail", "skip")
_OPTIONS: dict[str, tuple[str, Any]] = {
    "-i": ("input_", "str"), "--input": ("input_", "str"),
    "-o": ("output", "str"), "--output": ("output", "str"),
    "--format": ("fmt", ("choice", _FORMATS)),
    "--type-field": ("type_field", "str"),
    "--time-field": ("time_field", "str"),
    "--time-unit": ("time_unit", ("choice", None)),  # (cep.units.TIME_UNITS)
    "--op-field": ("op_field", "str"),
    "--lateness": ("lateness", "str"),
    "--late-output": ("late_output", "str"),
    "--on-error": ("on_error", ("choice", _ON_ERROR)),
    "--errors": ("errors", "str"),
    "--checkpoint": ("checkpoint", "str"),
    "--checkpoint-every": ("checkpoint_every", ("int", 1)),
    "--checkpoint-interval": ("checkpoint_interval", ("float", 0)),
    "-q": ("quiet", "flag"), "--quiet": ("quiet", "flag"),
    "--no-progress": ("no_progress", "flag"),
    "--idle-advance": ("idle_advance", "str"),
    "--workers": ("workers", ("int", 1)),
    "--test-stop-after": ("test_stop_after", ("int", 1)),
    "--test-crash-at-stop": ("test_crash_at_stop", "flag"),
}
# the values click gives the parameters that are not on the command line
_DEFAULTS: dict[str, Any] = {
    "input_": "-", "output": "-", "fmt": "jsonl", "type_field": "type", "time_field": "ts", "time_unit": "s",
    "op_field": "op", "lateness": None, "late_output": None, "on_error": "fail", "errors": None,
    "checkpoint": None, "checkpoint_every": 10_000, "checkpoint_interval": 10.0, "quiet": False,
    "no_progress": False, "idle_advance": None, "workers": 1, "test_stop_after": None,
    "test_crash_at_stop": False,
}
_INT = lazy(r"[0-9]{1,18}\Z")
_FLOAT = lazy(r"[0-9]{1,15}(\.[0-9]{0,15})?\Z")


def plain_run(args: list[str]) -> dict[str, Any] | None:
    """``cep run``'s parameters as click would pass them to ``run_cmd``; None: leave ``args`` to click.

    None for anything this reading does not make sure of: another command, help, an
    option not given as ``--name VALUE``, an option twice, a value that click could
    refuse or read differently, a pattern argument that is a directory or unreadable.
    """
    if len(args) < 2 or args[0] != "run" or "_CEP_COMPLETE" in os.environ:
        return None
    params: dict[str, Any] = {}
    patterns: list[str] = []
    i = 1
    while i < len(args):
        a = args[i]
        i += 1
        if not a.startswith("-"):
            patterns.append(a)
            continue
        spec = _OPTIONS.get(a)
        if spec is None:
            return None  # (help, --, -, --opt=value, -qi, an unknown option: click's business)
        name, kind = spec
        if name in params:
            return None
        if kind == "flag":
            params[name] = True
            continue
        if i == len(args):
            return None
        v = args[i]
        i += 1
        if v.startswith("-") and v != "-":
            return None
        if kind != "str":
            what, arg = kind
            if what == "choice":
                if arg is None:
                    from cep.units import TIME_UNITS

                    arg = tuple(TIME_UNITS)
                if v not in arg:
                    return None
            elif what == "int":
                if not _INT.match(v) or int(v) < arg:
                    return None
                v = int(v)
            elif not _FLOAT.match(v) or float(v) < arg:
                return None
            else:
                v = float(v)
        params[name] = v
    if not patterns:
        return None
    resolved = []
    for p in patterns:
        try:
            st = os.stat(p)
        except OSError:
            st = None
        if st is not None and (stat.S_ISDIR(st.st_mode) or not os.access(p, os.R_OK)):
            return None  # (click.Path(dir_okay=False) says why)
        if st is None or p.endswith(("/", os.sep)) or not stat.S_ISREG(st.st_mode):
            from cep import patterns as shipped  # a shipped pattern's bare name: its installed file

            p = shipped.resolve(p)
        resolved.append(p)
    return {**_DEFAULTS, **params, "patterns": resolved}


def run_options(params: dict[str, Any]) -> Any:
    """``cep.commands.run.RunOptions`` of ``run_cmd``'s parameters (both readings of the command line)."""
    from cep.commands.run import RunOptions

    p = params
    return RunOptions(
        patterns=list(p["patterns"]), input=p["input_"], output=p["output"], fmt=p["fmt"],
        type_field=p["type_field"], time_field=p["time_field"], time_unit=p["time_unit"],
        op_field=p["op_field"], lateness=p["lateness"], late_output=p["late_output"], on_error=p["on_error"],
        errors=p["errors"], checkpoint=p["checkpoint"], checkpoint_every=p["checkpoint_every"],
        checkpoint_interval=p["checkpoint_interval"], quiet=p["quiet"], progress=not p["no_progress"],
        test_stop_after=p["test_stop_after"], test_crash_at_stop=p["test_crash_at_stop"],
        idle_advance=p["idle_advance"], workers=p["workers"],
    )


def _echo_err(text: str) -> None:
    """``click.echo(text, err=True)``: the line, then a flush."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def final_status(e: SystemExit | Exception) -> int:
    """The exit status of a command that ended by ``e`` (both entry points: here and ``cep.cli_click``):
    a ``SystemExit``'s code, or, for any other exception, EXIT_OTHER after one ``cep: error:`` line
    (the exception is raised again, with its traceback, when ``CEP_DEBUG`` is set)."""
    if isinstance(e, SystemExit):
        return e.code if isinstance(e.code, int) else (EXIT_OK if e.code is None else EXIT_OTHER)
    if os.environ.get("CEP_DEBUG"):
        raise e
    _echo_err(f"cep: error: {type(e).__name__}: {e}")
    return EXIT_OTHER


def main(argv: list[str] | None = None) -> None:
    """Console entry point: a plain ``cep run`` here, anything else through click (``cep.cli_click.main``).

    The plain run maps errors to statuses and messages as click's ``main`` with
    ``cep.cli_click.main`` around it does: Ctrl-C is "cep: interrupted" (130) after
    the empty line click prints, a broken output pipe is a quiet status 1, any
    other error one line (a traceback with ``CEP_DEBUG=1``).
    """
    params = plain_run(sys.argv[1:] if argv is None else list(argv))
    if params is None:
        from cep.cli_click import main as click_main

        click_main(argv)
        return
    try:
        try:
            from cep import codegen
            from cep.commands.heap import setup_gc

            # compiled generated code kept across runs, from here on (``run`` does it too, for its other
            # callers); undone after (tests call ``main`` in their own process)
            kept = codegen.use_code_cache(codegen.code_cache_dir())
            try:
                with setup_gc():  # (what the imports make is kept)
                    from cep.commands.run import run
                rc = run(run_options(params), sys.stderr)
            finally:
                codegen.use_code_cache(kept)
            sys.exit(rc)
        except (EOFError, KeyboardInterrupt) as e:  # click: an empty line, then Abort
            _echo_err("")
            if isinstance(e, KeyboardInterrupt):
                _echo_err("cep: interrupted")
                rc = EXIT_INTERRUPTED
            else:
                _echo_err("cep: aborted")
                rc = EXIT_OTHER
        except OSError as e:
            if e.errno != errno.EPIPE:
                raise
            # the reader of our output went away (e.g. `| head`): as click does, no complaint at exit
            from click.utils import PacifyFlushWrapper

            sys.stdout = PacifyFlushWrapper(sys.stdout)  # type: ignore[assignment]
            sys.stderr = PacifyFlushWrapper(sys.stderr)  # type: ignore[assignment]
            rc = EXIT_OTHER
    except (SystemExit, Exception) as e:  # noqa: BLE001 - no traceback for users, unless asked
        rc = final_status(e)
    import gc

    # the run is over and its files closed: the collections of the interpreter's exit would walk every
    # object the run made (a twentieth of a short run) to free nothing the process needs freed
    gc.freeze()
    sys.exit(rc if isinstance(rc, int) else EXIT_OK)


def __getattr__(name: str) -> Any:
    """``cep.cli.cli`` and the other click objects (tests and embedders use them), imported when asked for."""
    if name.startswith("__"):
        raise AttributeError(name)
    import cep.cli_click

    try:
        return getattr(cep.cli_click, name)
    except AttributeError:
        raise AttributeError(f"module 'cep.cli' has no attribute {name!r}") from None


if __name__ == "__main__":  # pragma: no cover
    main()
