"""What a 0 in the auth settings stands for."""

from __future__ import annotations

from datetime import timedelta

from llmgw.config.auth import Auth, Personal, Price


def test_zero_settings_mean_the_documented_defaults() -> None:
    auth = Auth()
    assert auth.effective_cache_ttl == timedelta(seconds=30)
    assert auth.effective_negative_ttl == timedelta(seconds=30)
    assert auth.effective_flush_interval == timedelta(seconds=1)
    assert auth.effective_batch_size == 500
    assert auth.effective_buffer_size == 100_000
    assert auth.effective_max_key_ttl is None
    assert auth.effective_usage_retention is None


def test_set_values_are_kept() -> None:
    auth = Auth(
        cache_ttl=timedelta(seconds=5),
        negative_ttl=timedelta(seconds=2),
        flush_interval=timedelta(milliseconds=200),
        batch_size=50,
        buffer_size=10,
        max_key_ttl=timedelta(days=30),
        usage_retention=timedelta(days=7),
    )
    assert auth.effective_cache_ttl == timedelta(seconds=5)
    assert auth.effective_negative_ttl == timedelta(seconds=2)
    assert auth.effective_flush_interval == timedelta(milliseconds=200)
    assert (auth.effective_batch_size, auth.effective_buffer_size) == (50, 10)
    assert auth.effective_max_key_ttl == timedelta(days=30)
    assert auth.effective_usage_retention == timedelta(days=7)


def test_prices_and_personal_budget() -> None:
    auth = Auth(pricing={"big": Price(prompt_per_1k=3000)}, default_price=Price(completion_per_1k=7))
    assert auth.price("big").prompt_per_1k == 3000
    assert auth.price("other").completion_per_1k == 7
    assert Personal(budget=2.5).budget_micros == 2_500_000
    assert Personal().budget_micros is None
