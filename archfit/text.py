"""Text a person reads fits :data:`WIDTH` columns: a longer line is wrapped at word boundaries,
its continuation indented under it (tables are made to fit, never wrapped)."""

from __future__ import annotations

import textwrap

WIDTH = 100


def wrap(text: str, width: int = WIDTH) -> str:
    """``text`` with every line longer than ``width`` wrapped, each continuation indented four
    columns past the line's own indent."""
    out: list[str] = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        indent = line[:len(line) - len(line.lstrip())]
        out += textwrap.wrap(line, width, subsequent_indent=indent + "    ",
                             break_on_hyphens=False, break_long_words=False)  # paths whole
    return "\n".join(out)
