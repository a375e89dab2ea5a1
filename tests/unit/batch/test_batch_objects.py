"""The Batch API's objects: status moves stamp their time once, and the gateway's own
fields never show."""

from __future__ import annotations

from llmgw.batch import batch_objects as objects


def test_a_new_batch_expires_after_its_window_and_hides_its_file_ids() -> None:
    batch = objects.new_batch(
        "batch_1", endpoint="/v1/embeddings", input_file_id="file-1", total=3, metadata=None, now=100.0
    )
    shown = objects.public(batch)
    assert shown["expires_at"] == 100 + 24 * 3600
    assert shown["request_counts"] == {"total": 3, "completed": 0, "failed": 0}
    assert "_llmgw" not in shown
    output_id, error_id = objects.reserved_file_ids(batch)
    assert output_id.startswith("file-")
    assert output_id != error_id


def test_moving_a_batch_stamps_the_first_time_only() -> None:
    batch = objects.new_batch(
        "b", endpoint="/v1/completions", input_file_id="f", total=1, metadata=None, now=1.0
    )
    cancelling = objects.moved(batch, objects.CANCELLING, 5.0)
    again = objects.moved(cancelling, objects.CANCELLING, 9.0)
    assert (again["status"], again["cancelling_at"]) == ("cancelling", 5)
    assert batch["status"] == objects.VALIDATING


def test_the_owner_is_the_project_else_the_person() -> None:
    assert objects.owner_of("project", "p", None) == "project:p"
    assert objects.owner_of("personal", None, "u") == "user:u"
