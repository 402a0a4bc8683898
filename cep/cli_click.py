"""The ``cep`` command's click definitions: ``run``, ``check``, ``explain``, ``patterns``, ``spark``.

``cep.cli.main`` is the entry point: it runs a plain ``cep run`` without importing click
(issue 15) and everything else (help, errors, the other commands) through ``main`` here.
The commands are documented in docs/language.md section 6.

The exit statuses and why the layer is thin: ``cep.cli``.
"""

from __future__ import annotations

import os
import sys

import click

from cep import __version__
from cep.exit_codes import EXIT_INTERRUPTED, EXIT_OK, EXIT_OTHER
from cep.units import TIME_UNITS

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _pattern_paths(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> list[str]:
    """Pattern arguments as paths: a shipped pattern's bare name becomes its installed file."""
    from cep import patterns as shipped

    return [shipped.resolve(v) for v in values]


PATTERN_FILES = click.argument("patterns", nargs=-1, required=True, callback=_pattern_paths,
                               type=click.Path(dir_okay=False))


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, "-V", "--version", prog_name="cep")
def cli() -> None:
    """cep: detect composite events (SEQ/AND patterns) on a stream of JSON or CSV records.

    \b
    cep run PATTERNS... [-i INPUT] [-o OUTPUT]   detect matches, JSON lines out
    cep check PATTERNS...                       validate pattern files
    cep explain PATTERNS...                     show the compiled query and plan
    cep patterns [NAME]                         list the shipped patterns, or print one

    PATTERNS are .pattern files, or names of shipped patterns (cep run card_testing).
    The pattern language is described in docs/language.md of the cep sources.

    Exit status: 0 ok, 1 usage or other error, 2 pattern error, 3 bad input record.
    """


@cli.command("run", context_settings=CONTEXT)
@PATTERN_FILES
@click.option("-i", "--input", "input_", default="-", show_default=True, metavar="PATH",
              help="Input: '-' for stdin, a file, or kafka://HOST:PORT/TOPIC?group=G&from=earliest.")
@click.option("-o", "--output", default="-", show_default=True, metavar="PATH",
              help="Output of composite events: '-' for stdout, a file, or kafka://HOST:PORT/TOPIC.")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl", show_default=True,
              help="Input format: JSON lines, or CSV with a header row (numeric-looking cells are numbers).")
@click.option("--type-field", default="type", show_default=True, help="Field holding the event type.")
@click.option("--time-field", default="ts", show_default=True, help="Field holding the event time.")
@click.option("--time-unit", type=click.Choice(list(TIME_UNITS)), default="s", show_default=True,
              help="Unit of numeric event times (ISO-8601 strings are converted to it).")
@click.option("--op-field", default="op", show_default=True,
              help="Field holding the op: '+' insert (default) or '-' retract.")
@click.option("--lateness", default=None, metavar="DURATION",
              help="Allowed disorder, e.g. '5 s', '2min', '10' (timestamp units). Default 0.")
@click.option("--late-output", default=None, metavar="PATH", help="Write late records here.")
@click.option("--on-error", type=click.Choice(["fail", "skip"]), default="fail", show_default=True,
              help="On a bad record: stop with status 3, or report it and go on.")
@click.option("--errors", default=None, metavar="PATH",
              help="With --on-error skip: write bad records and reasons here (default stderr).")
@click.option("--checkpoint", default=None, metavar="PATH",
              help="Save progress here and resume from it when it exists (same patterns and options).")
@click.option("--checkpoint-every", default=10_000, show_default=True, type=click.IntRange(min=1),
              metavar="N", help="Checkpoint every N records.")
@click.option("--checkpoint-interval", default=10.0, show_default=True, type=click.FloatRange(min=0),
              metavar="SECONDS", help="Checkpoint at least this often (0: only by records and at exit).")
@click.option("-q", "--quiet", is_flag=True, help="No end-of-run summary on stderr.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--idle-advance", default=None, metavar="DURATION",
              help="When no record has arrived for this long (wall clock), advance the watermark to "
                   "the current time minus the lateness, deciding pending matches (for event times "
                   "that follow the wall clock). Default: never.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1), metavar="N",
              help="Worker processes, each running its share of the patterns' partition keys (file input only). "
                   "1: one process.")
# test hooks (hidden; the checkpoint and Kafka tests stop or "crash" a run mid-stream with them)
@click.option("--test-stop-after", type=click.IntRange(min=1), default=None, hidden=True, metavar="N")
@click.option("--test-crash-at-stop", is_flag=True, hidden=True)
def run_cmd(patterns, input_, output, fmt, type_field, time_field, time_unit, op_field, lateness,
            late_output, on_error, errors, checkpoint, checkpoint_every, checkpoint_interval, quiet,
            no_progress, idle_advance, workers, test_stop_after, test_crash_at_stop) -> None:
    """Run the patterns of PATTERNS over the input; write every match as a JSON line.

    Several pattern files (and several patterns in one file) run together over
    one pass of the input.  Exit status: 0 ok, 2 pattern error, 3 bad input
    record (the message names its line), 1 other errors.
    """
    from cep.commands.run import RunOptions, run

    opts = RunOptions(
        patterns=list(patterns), input=input_, output=output, fmt=fmt, type_field=type_field,
        time_field=time_field, time_unit=time_unit, op_field=op_field, lateness=lateness,
        late_output=late_output, on_error=on_error, errors=errors, checkpoint=checkpoint,
        checkpoint_every=checkpoint_every, checkpoint_interval=checkpoint_interval, quiet=quiet,
        progress=not no_progress, test_stop_after=test_stop_after,
        test_crash_at_stop=test_crash_at_stop, idle_advance=idle_advance, workers=workers,
    )
    sys.exit(run(opts, sys.stderr))


@cli.command("check", context_settings=CONTEXT)
@PATTERN_FILES
def check_cmd(patterns) -> None:
    """Validate pattern files; print each pattern's summary (status 2 on errors)."""
    from cep.commands.check import run_check

    sys.exit(run_check(list(patterns), sys.stdout, sys.stderr))


@cli.command("explain", context_settings=CONTEXT)
@PATTERN_FILES
@click.option("--format", "fmt", type=click.Choice(["text", "json", "dot"]), default="text",
              show_default=True, help="Output format of the plan.")
@click.option("--generated", is_flag=True,
              help="Also print the source of every function generated for the patterns (text, json).")
def explain_cmd(patterns, fmt, generated) -> None:
    """Print each pattern's compiled query, its join-tree plan and the physical plan that runs."""
    from cep.commands.explain import run_explain

    sys.exit(run_explain(list(patterns), fmt, sys.stdout, sys.stderr, generated))


@cli.command("patterns", context_settings=CONTEXT)
@click.argument("name", required=False)
def patterns_cmd(name) -> None:
    """List the shipped patterns, or print the pattern NAME (to read, or to copy and adapt).

    Run a shipped pattern by its name: cep run card_testing -i txns.jsonl
    """
    from cep import patterns as shipped

    if name is None:
        available = shipped.names()
        width = max(map(len, available))
        for n in available:
            click.echo(f"{n:<{width}}  {shipped.summary(n)}")
        click.echo(f"\n{len(available)} shipped patterns in {shipped.path(available[0]).parent}\n"
                   "print one: cep patterns NAME; run one: cep run NAME -i INPUT")
        sys.exit(EXIT_OK)
    try:
        click.echo(shipped.text(name), nl=False)
    except KeyError:
        from cep.lang.suggest import hint

        raise click.ClickException(f"no shipped pattern '{name}'{hint(name, shipped.names())}; "
                                   "`cep patterns` lists them") from None
    sys.exit(EXIT_OK)


@cli.command("spark", context_settings={**CONTEXT, "ignore_unknown_options": True,
                                        "allow_extra_args": True, "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def spark_cmd(args) -> None:
    """Run patterns on Spark Structured Streaming (needs: pip install 'cep[spark]').

    Arguments are those of the Spark runner; see `cep spark --help` once PySpark is installed.
    """
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        raise click.ClickException("cep spark needs PySpark, which is not installed: "
                                   "pip install 'cep[spark]'")
    try:
        from cep.connectors import spark_cli  # type: ignore[import-not-found]
    except ImportError as e:
        raise click.ClickException(f"cep spark is not available in this installation: {e}") from None
    entry = spark_cli.main
    if isinstance(entry, click.Command):
        rc = entry.main(args=list(args), prog_name="cep spark", standalone_mode=False)
    else:
        rc = entry(list(args))
    sys.exit(rc or EXIT_OK)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the group; map click and unexpected errors to one-line messages."""
    try:
        rc = cli.main(args=argv, prog_name="cep", standalone_mode=False)
    except click.exceptions.Exit as e:
        rc = e.exit_code
    except click.ClickException as e:
        e.show()
        rc = EXIT_OTHER
    except click.exceptions.Abort as e:
        # click turns Ctrl-C (KeyboardInterrupt) into Abort: it is still an interrupt (exit 130)
        if isinstance(e.__context__, KeyboardInterrupt):
            click.echo("cep: interrupted", err=True)
            rc = EXIT_INTERRUPTED
        else:
            click.echo("cep: aborted", err=True)
            rc = EXIT_OTHER
    except KeyboardInterrupt:
        click.echo("cep: interrupted", err=True)
        rc = EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader of our output went away (e.g. `| head`): stop quietly
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        rc = EXIT_OTHER
    except (SystemExit, Exception) as e:  # noqa: BLE001 - no traceback for users, unless asked
        from cep.cli import final_status

        rc = final_status(e)
    sys.exit(rc if isinstance(rc, int) else EXIT_OK)
