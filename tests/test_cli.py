"""The command line's help: every text written for it reaches the reader whole."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from app.cli import cli


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    found: list[tuple[tuple[str, ...], Any]] = []
    for name, command in group.commands.items():
        found.append(((*prefix, name), command))
        if isinstance(command, typer.core.TyperGroup):
            found += _commands(command, (*prefix, name))
    return found


def _flat(text: str) -> str:
    # Help is wrapped to the terminal's width: compare the words alone.
    return " ".join(text.split())


COMMANDS = _commands(typer.main.get_command(cli))


def test_every_command_is_checked():
    assert sorted(" ".join(path) for path, _ in COMMANDS) == [
        "create-org",
        "db",
        "db status",
        "db stop",
        "downgrade",
        "eval",
        "migrate",
        "replay",
        "serve",
        "sync",
        "worker",
    ]


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(path) for path, _ in COMMANDS])
def test_help_shows_every_text_whole(path, command):
    """At 80 columns, as a terminal opens. Rich markup dropped square brackets with what they
    held (`vk eval --help` said "Documents folder ." for "Documents folder [docs/ beside
    DATASET]."), and rich's tables cut PROMETHEUS_MULTIPROC_DIR to "PROMETHEUS_MULTIPROC_D…"."""
    result = CliRunner().invoke(cli, [*path, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    shown = _flat(result.output)
    texts = [command.help or ""]
    texts += [p.help for p in command.params if getattr(p, "help", None) and not getattr(p, "hidden", False)]
    assert [text for text in texts if _flat(text) not in shown] == []
