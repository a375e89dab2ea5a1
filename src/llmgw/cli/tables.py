"""The command line's tables: rows of the admin API's answers, fitted to the terminal.

A table must read in an 80-column terminal. Rich shrinks columns to fit and cuts what
no longer fits with an ellipsis, headers included (`prompt_to…`), and its shrinking
ignores a column's minimum width; so the widths are worked out here (`fit`): every
column at least as wide as its header's longest word, headers wrapping at their
spaces, cells wrapping (a long word folds onto the next line) instead of being cut. Columns
that are long and seldom needed (full timestamps, who changed what) are left out
unless `--wide` asks for them; with `--wide` every column is shown and every value
on one line, however wide that makes the table. `--json` prints the rows as the API
gave them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import typer
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table

WIDE = typer.Option(False, "--wide", help="Every column, each value in full on one line.")
JSON = typer.Option(False, "--json", help="Print JSON instead of a table.")
_UNBOUNDED_COLUMNS = 1_000_000
_SHORT_WORD = 8


@dataclass(frozen=True)
class Column:
    """One column: the row's key, its header (spaces let it wrap), whether it is
    shown only with `--wide`, and whether its values are kept whole (a key's id, to be
    copied into `llmgw keys revoke`) rather than folded."""

    key: str
    header: str = ""
    wide_only: bool = False
    whole: bool = False

    @property
    def title(self) -> str:
        return self.header or self.key.replace("_", " ")


def columns(*specs: str | Column) -> tuple[Column, ...]:
    """Columns from keys (their header is the key with spaces) or Column values."""
    return tuple(spec if isinstance(spec, Column) else Column(spec) for spec in specs)


def cell(value: Any) -> str:
    """A value as a cell: a dash for none, lists comma-separated."""
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value) or "(none)"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def fit(narrowest: Sequence[int], values: Sequence[int], widest: Sequence[int], room: int) -> list[int]:
    """Column widths within `room` where they can be: each column its `widest` (header
    and values on one line) if all fit; else its `narrowest`, then the space left
    handed out a character at a time to the narrowest column that wants more, first
    up to its longest value (so short values are not folded to make room for long
    ones), then up to its header on one line."""
    widths = list(narrowest)
    spare = room - sum(widths)
    for targets in ([max(n, v) for n, v in zip(narrowest, values, strict=True)], list(widest)):
        while spare > 0:
            wanting = [i for i, width in enumerate(widths) if width < targets[i]]
            if not wanting:
                break
            widths[min(wanting, key=lambda i: widths[i])] += 1
            spare -= 1
    return widths


def table(
    rows: Sequence[dict[str, Any]],
    spec: Sequence[Column],
    *,
    width: int,
    wide: bool = False,
    title: str = "",
) -> Table:
    """The rich Table of `rows` under `spec`'s columns, `width` columns wide at most
    (unless its headers' words alone need more), or as wide as it needs with `wide`."""
    shown = [column for column in spec if wide or not column.wide_only]
    out = Table(title=title or None)
    cells = [[cell(row.get(column.key)) for column in shown] for row in rows]
    if wide:
        for column in shown:
            out.add_column(column.title, no_wrap=True)
    else:
        narrowest, preferred, values, widest = [], [], [], []
        for index, column in enumerate(shown):
            texts = [line[index] for line in cells]
            longest = max((cell_len(text) for text in texts), default=0)
            least = max(cell_len(word) for word in column.title.split())
            if column.whole:
                least = max(least, longest)
            narrowest.append(least)
            # Short words (a state, a number) folded in two read badly: kept whole when
            # there is room for it.
            short = [cell_len(w) for text in texts for w in text.split() if cell_len(w) <= _SHORT_WORD]
            preferred.append(max([least, *short]))
            values.append(longest)
            widest.append(max(cell_len(column.title), longest))
        # Each column has a space either side and a border line before it; one closes the row.
        room = width - 3 * len(shown) - 1
        if sum(preferred) <= room:
            narrowest = preferred
        for column, chars in zip(shown, fit(narrowest, values, widest, room), strict=True):
            out.add_column(column.title, width=chars, overflow="fold")
    for line in cells:
        out.add_row(*line)
    return out


def show(
    rows: Iterable[dict[str, Any]],
    spec: Sequence[str | Column],
    *,
    as_json: bool,
    wide: bool = False,
    title: str = "",
) -> None:
    """Prints `rows` as JSON or as a table fitted to the terminal (`wide`: as wide as it needs)."""
    rows = list(rows)
    if as_json:
        typer.echo(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
        return
    console = Console()
    rendered = table(rows, columns(*spec), width=console.width, wide=wide, title=title)
    if wide:
        # Measured against no limit (measure clamps to the console's width by default).
        unbounded = console.options.update_width(_UNBOUNDED_COLUMNS)
        needed = console.measure(rendered, options=unbounded).maximum
        console = Console(width=max(console.width, needed))
    console.print(rendered)
