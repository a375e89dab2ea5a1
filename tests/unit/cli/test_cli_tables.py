"""Tables fitted to the terminal: headers never cut, values folded rather than cut,
and the space shared so that short values stay whole."""

from __future__ import annotations

import io

from rich.console import Console

from llmgw.cli.tables import Column, columns, fit, table


def _render(rows: list[dict[str, object]], *specs: str | Column, width: int = 80, wide: bool = False) -> str:
    console = Console(width=10_000 if wide else width, record=True, file=io.StringIO())
    console.print(table(rows, columns(*specs), width=width, wide=wide))
    return console.export_text()


def test_widths_are_the_widest_when_they_fit() -> None:
    assert fit([2, 4], [6, 10], [6, 12], room=40) == [6, 12]


def test_short_values_are_made_whole_before_long_ones_grow() -> None:
    # Room for 20: the minimums take 10; the 6-wide value is whole before the long one grows.
    assert fit([2, 4, 4], [6, 40, 1], [6, 40, 8], room=20) == [6, 10, 4]


def test_headers_come_after_values_and_minimums_hold_when_nothing_is_left() -> None:
    assert fit([3, 3], [3, 3], [11, 5], room=9) == [5, 4]
    assert fit([3, 3], [3, 3], [11, 5], room=16) == [11, 5]
    assert fit([5, 5], [30, 30], [30, 30], room=4) == [5, 5]


def test_no_header_is_cut_at_80_columns() -> None:
    specs = ("name", "origin", "prompt_tokens", "completion_tokens", "budget_period", "allowed_models")
    rows: list[dict[str, object]] = [
        dict.fromkeys(specs, "a-rather-long-value-that-cannot-fit-in-a-column " * 2)
    ]
    shown = _render(rows, *specs, "x", "y", "z")
    assert max(len(line) for line in shown.splitlines()) <= 80
    assert "…" not in shown
    for word in ("prompt", "tokens", "completion", "budget", "period", "allowed", "models"):
        assert word in shown


def test_wide_shows_every_column_and_whole_values() -> None:
    rows: list[dict[str, object]] = [{"name": "m", "updated_by": "alice@gpu-host-01.example.com"}]
    spec = ("name", Column("updated_by", wide_only=True))
    assert "alice@" not in _render(rows, *spec)
    assert "alice@gpu-host-01.example.com" in _render(rows, *spec, wide=True)


def test_a_whole_column_is_never_folded() -> None:
    rows: list[dict[str, object]] = [{"id": "3f9a0c1d", "name": "x" * 200}]
    shown = _render(rows, Column("id", whole=True), "name", width=40)
    assert "3f9a0c1d" in shown


def test_short_words_stay_whole_when_there_is_room_and_headers_win_when_there_is_not() -> None:
    rows: list[dict[str, object]] = [
        {"name": "nightly-evaluation-of-the-ranking-model", "tpm": 100000, "state": "active"}
    ]
    roomy = _render(rows, "name", "tpm", "state", width=40)
    assert "100000" in roomy
    assert "active" in roomy
    # 22 columns leave room for the headers' words exactly, not for the short values too.
    tight = _render(rows, "name", "tpm", "state", width=22)
    assert max(len(line) for line in tight.splitlines()) <= 22, tight
    for header in ("name", "tpm", "state"):
        assert header in tight
