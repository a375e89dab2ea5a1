"""Key material: shape, id, hash and the bearer header."""

from __future__ import annotations

import pytest

from llmgw.auth.keys import bearer_token, hash_key, key_id_of, new_key


def test_a_new_key_carries_its_id_and_is_stored_by_hash() -> None:
    made = new_key()
    assert made.plaintext.startswith(f"llmgw-{made.id}-")
    assert key_id_of(made.plaintext) == made.id
    assert made.hash == hash_key(made.plaintext)
    assert made.plaintext not in made.hash
    assert new_key().plaintext != made.plaintext


@pytest.mark.parametrize(
    "token", ["sk-abc", "llmgw-", "llmgw-abc-def", "llmgw-0123456789-x", "llmgw-01234567-"]
)
def test_tokens_not_shaped_like_keys_have_no_id(token: str) -> None:
    assert key_id_of(token) is None


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer  abc ", "abc"),
        ("Basic abc", None),
        ("Bearer", None),
        (None, None),
        ("", None),
    ],
)
def test_bearer_token(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token
