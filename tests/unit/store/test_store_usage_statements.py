"""SQLite's INSERTs of usage records: every record bound once, in statements of a few
fixed sizes, so the sqlite3 module's statement cache holds them all whatever the
batches' sizes (a statement prepared anew costs more than the records it writes)."""

from __future__ import annotations

from llmgw.store.rows import RecordKey, Records, RecordValues
from llmgw.store.usage import SQLITE_ROWS_PER_INSERT, _sqlite_inserts

KEY: RecordKey = ("k1", None, "p", "t", "o", "m", 200, False)


def values(count: int) -> list[RecordValues]:
    return [(float(i), f"r{i}", "rep", i, 2 * i, 3 * i, 0.0, -1.0, 0.5, "") for i in range(count)]


def test_any_number_of_records_is_written_in_statements_of_nine_sizes() -> None:
    statements: set[str] = set()
    for count in range(1, 3 * SQLITE_ROWS_PER_INSERT):
        records: Records = {KEY: values(count)}
        bound: list[object] = []
        for sql, parameters in _sqlite_inserts(records):
            statements.add(sql)
            rows = sql.count("), (") + 1
            assert rows & (rows - 1) == 0, "a power of two"
            assert rows <= SQLITE_ROWS_PER_INSERT
            assert parameters[: len(KEY)] == KEY
            assert len(parameters) == len(KEY) + rows * len(records[KEY][0])
            bound.extend(parameters[len(KEY) :])
        assert bound == [value for row in records[KEY] for value in row]
    assert len(statements) == SQLITE_ROWS_PER_INSERT.bit_length()


def test_each_key_is_bound_once_per_statement_of_its_own_records() -> None:
    other: RecordKey = ("k2", "u", None, None, None, "m", 429, True)
    inserts = list(_sqlite_inserts({KEY: values(3), other: values(1)}))
    assert [parameters[: len(KEY)] for _, parameters in inserts] == [KEY, KEY, other]
