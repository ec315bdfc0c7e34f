"""Run a command's main() in the test's process: its exit code and what it printed on stderr."""

from __future__ import annotations


def run_command(main, argv, capsys) -> tuple[int, str]:
    """(exit code, stderr) of main(argv); argparse's own errors exit from inside parse_args."""
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    return code, capsys.readouterr().err
