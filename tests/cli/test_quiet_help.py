"""``--quiet``'s help says what the command line does with progress: a status line on a terminal, and plain timed
lines when stderr is redirected."""
from __future__ import annotations

import io

from placement_dsl.progress import LogReporter, for_terminal
from placement_dsl.testing import run_cli


def test_quiet_help_says_progress_also_goes_to_a_redirected_stderr(capsys):
    code, out, _ = run_cli(capsys, "solve", "--help")
    text = " ".join(out.split())
    assert code == 0 and "redirected" in text and "shown only while stderr is a terminal" not in text
    assert isinstance(for_terminal(stream=io.StringIO()), LogReporter)  # what the help now says


def test_every_command_takes_quiet(capsys):
    """A script passing ``--quiet`` to every command: ``export`` alone refused it ("unrecognized arguments")."""
    from placement_dsl.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    assert [name for name, parser in sub.choices.items() if "--quiet" not in parser._option_string_actions] == []
    assert run_cli(capsys, "zoo", "--quiet")[0] == 0
