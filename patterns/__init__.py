"""The shipped patterns (``*.pattern``), installed as ``cep.patterns`` package data.

Why an API here: an installed ``cep`` has no checkout to point at, so users
reach these files by name: ``cep patterns`` lists them, ``cep patterns NAME``
prints one (to copy and adapt), and any command that takes pattern files
(``cep run``, ``check``, ``explain``, ``spark``) accepts a shipped pattern's
bare name (``cep run card_testing -i txns.jsonl``).  A path that exists always
wins, so ``patterns/card_testing.pattern`` in a checkout keeps working
(docs/language.md, section 6).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

SUFFIX = ".pattern"


def names() -> list[str]:
    """The shipped patterns' names (file names without ``.pattern``), sorted."""
    return sorted(f.name[: -len(SUFFIX)] for f in resources.files(__name__).iterdir()
                  if f.name.endswith(SUFFIX))


def path(name: str) -> Path:
    """The installed file of a shipped pattern; ``KeyError`` for an unknown name."""
    if name not in names():
        raise KeyError(name)
    return Path(str(resources.files(__name__).joinpath(name + SUFFIX)))


def text(name: str) -> str:
    """A shipped pattern's text."""
    return path(name).read_text(encoding="utf-8")


def summary(name: str) -> str:
    """The first line of a shipped pattern's leading comment (what it detects)."""
    for line in text(name).splitlines():
        stripped = line.strip()
        if stripped.startswith(("--", "#")):
            return stripped.lstrip("-#").strip()
        if stripped:
            break
    return ""


def resolve(arg: str) -> str:
    """A command-line pattern argument as a path: an existing path as given, else a shipped name's file.

    Anything else is returned unchanged, so reading it reports the missing file.
    """
    if Path(arg).exists() or arg not in names():
        return arg
    return str(path(arg))
