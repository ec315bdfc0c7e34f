"""Two flag values argparse misreads, read as the user meant them or refused in words that say why.

A negative number in scientific notation after a flag (`--learning-rate -1e-3`) looks like
an option to argparse, which then says "expected one argument"; `join_negative_values`
rewrites it as `--learning-rate=-1e-3`, so the value reaches the config's own check
("learning_rate = -0.001 must be a finite number > 0"). A flag of several integers given
with commas (`--hidden-sizes 64,64`) gets "invalid int value"; `int_list_item` is the type
of one such integer, whose error says that the values are separated by spaces.
"""

from __future__ import annotations

import argparse
from typing import Callable, Sequence


def is_negative_number(text: str) -> bool:
    """'-1e-3', '-0.5', '-inf', or a comma list of numbers starting with one ('-1e-3,1e-3': a sweep)."""
    if not text.startswith("-"):
        return False
    try:
        for part in text.split(","):
            float(part)
    except ValueError:
        return False
    return True


def join_negative_values(argv: Sequence[str], parser: argparse.ArgumentParser) -> list[str]:
    """`argv` with each flag of `parser` that takes one value joined to a negative number after it
    (`--ent-coef -0.5` → `--ent-coef=-0.5`); everything else, and all after `--`, as it was."""
    one_value = {flag for flag, action in parser._option_string_actions.items() if action.nargs is None}
    joined, index = [], 0
    while index < len(argv):
        token = argv[index]
        if token == "--":
            return joined + list(argv[index:])
        if token in one_value and index + 1 < len(argv) and is_negative_number(argv[index + 1]):
            joined.append(f"{token}={argv[index + 1]}")
            index += 2
        else:
            joined.append(token)
            index += 1
    return joined


def int_list_item(flag: str, example: Sequence[int]) -> Callable[[str], int]:
    """The argparse type of one value of `flag` (nargs="+" integers such as --hidden-sizes): an int,
    or an error naming the text and showing the values separated by spaces (`example` if the
    text shows none)."""
    what = flag.lstrip("-").replace("-", " ")

    def parse(text: str) -> int:
        try:
            return int(text)
        except ValueError:
            pass
        parts = [part.strip() for part in text.split(",")]
        if "," in text and all(_is_int(part) for part in parts):
            raise argparse.ArgumentTypeError(
                f"{text!r}: {what} are given separated by spaces, not commas: {flag} {' '.join(parts)}")
        shown = " ".join(str(value) for value in example)
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a whole number ({what} are whole numbers separated by spaces: {flag} {shown})")

    return parse


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True
