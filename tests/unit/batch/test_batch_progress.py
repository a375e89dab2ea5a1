"""A batch's progress on disk: a result counts once its record is written, and a result
written without its record (the process died between the two) is dropped on reopening."""

from __future__ import annotations

from pathlib import Path

from llmgw.batch.batch_progress import ERRORS, OUTPUT, PROGRESS, Progress


def test_reopening_finds_the_finished_lines_and_counts(tmp_path: Path) -> None:
    progress = Progress(tmp_path)
    progress.record(0, True, b'{"custom_id":"a"}')
    progress.record(2, False, b'{"custom_id":"c"}')
    progress.close()
    again = Progress(tmp_path)
    assert (again.done, again.completed, again.failed) == ({0, 2}, 1, 1)
    again.record(1, True, b'{"custom_id":"b"}')
    again.close()
    assert (tmp_path / OUTPUT).read_bytes() == b'{"custom_id":"a"}\n{"custom_id":"b"}\n'
    assert (tmp_path / ERRORS).read_bytes() == b'{"custom_id":"c"}\n'


def test_a_result_without_its_record_is_dropped(tmp_path: Path) -> None:
    progress = Progress(tmp_path)
    progress.record(0, True, b'{"custom_id":"a"}')
    progress.close()
    # What a kill between the result and its record leaves: an output line, a torn record.
    with (tmp_path / OUTPUT).open("ab") as output:
        output.write(b'{"custom_id":"b"}\n')
    with (tmp_path / PROGRESS).open("ab") as records:
        records.write(b"1 1 ")
    again = Progress(tmp_path)
    assert again.done == {0}
    again.record(1, True, b'{"custom_id":"b"}')
    again.close()
    assert (tmp_path / OUTPUT).read_bytes() == b'{"custom_id":"a"}\n{"custom_id":"b"}\n'
    last = Progress(tmp_path)
    assert last.done == {0, 1}
    last.close()


def test_a_result_file_already_moved_away_stays_empty(tmp_path: Path) -> None:
    progress = Progress(tmp_path)
    progress.record(0, True, b"x")
    progress.close()
    (tmp_path / OUTPUT).unlink()  # placed among the files while finalizing
    again = Progress(tmp_path)
    assert again.output_path.stat().st_size == 0
    again.close()


def test_results_written_as_a_group_each_name_their_own_ends(tmp_path: Path) -> None:
    progress = Progress(tmp_path)
    progress.record_many([(0, True, b"a"), (1, False, b"b"), (2, True, b"c")])
    progress.close()
    records = (tmp_path / PROGRESS).read_text().splitlines()
    assert records == ["0 1 2 0", "1 0 2 2", "2 1 4 2"]
    again = Progress(tmp_path)
    assert (again.done, again.completed, again.failed) == ({0, 1, 2}, 2, 1)
    again.close()
