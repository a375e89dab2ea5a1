"""The sim's tokenizer and chat template: deterministic, lossless, and exact to count."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmgw.sim.chat_template import TemplateError, render_chat
from llmgw.sim.tokenizer import Tokenizer


def test_pieces_are_words_of_up_to_six_characters_with_their_leading_space() -> None:
    assert Tokenizer.pieces("Hello there, internationalization!") == [
        "Hello",
        " there",
        ",",
        " intern",
        "ationa",
        "lizati",
        "on",
        "!",
    ]


@given(st.text(max_size=200))
def test_pieces_join_back_to_the_text(text: str) -> None:
    assert "".join(Tokenizer.pieces(text)) == text


def test_same_text_same_ids_in_two_tokenizers() -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 3
    assert Tokenizer(32000).encode(text) == Tokenizer(32000).encode(text)


def test_ids_stay_inside_the_vocabulary_above_the_special_range() -> None:
    ids = Tokenizer(1000).encode("a b c d e f g h some longer words, and punctuation!")
    assert all(256 <= i < 1000 for i in ids)


def test_count_matches_encode_and_decode_inverts_encode() -> None:
    tokenizer = Tokenizer(32000)
    text = "  leading spaces, tabs\tand\nnewlines  "
    ids = tokenizer.encode(text)
    assert tokenizer.count(text) == len(ids)
    assert tokenizer.decode(ids) == text


def test_decode_of_an_unknown_id_is_unk() -> None:
    assert Tokenizer(32000).decode([999]) == "<unk>"


def test_a_shared_prefix_gives_shared_leading_ids() -> None:
    tokenizer = Tokenizer(32000)
    a = tokenizer.encode("You are a helpful assistant. Question one?")
    b = tokenizer.encode("You are a helpful assistant. Another question")
    assert a[:6] == b[:6]


def test_chat_template_renders_roles_and_the_generation_prompt() -> None:
    text = render_chat([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])
    assert text == "<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\n"


def test_chat_template_reads_text_parts() -> None:
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert render_chat([{"role": "user", "content": parts}], add_generation_prompt=False) == "<|user|>\nab\n"


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        ([], "at least one message"),
        (["hi"], "messages[0]: must be an object"),
        ([{"content": "x"}], "messages[0].role"),
        ([{"role": "user", "content": [{"type": "image_url"}]}], "messages[0].content[0]"),
        ([{"role": "user", "content": 5}], "messages[0].content"),
    ],
)
def test_chat_template_refusals_name_the_message(messages: list[object], fragment: str) -> None:
    with pytest.raises(TemplateError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        render_chat(messages)
