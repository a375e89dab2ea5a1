"""Durations and numbers a setting or the admin API takes are bounded: a hundred years,
2**53, a budget of a trillion units; beyond, a ValueError naming the value (which the
loader and the admin API turn into a sentence), never an OverflowError."""

from __future__ import annotations

from datetime import timedelta

import pytest

from llmgw.admin.models import OrgBody
from llmgw.config import Settings
from llmgw.core.durations import parse_duration


def test_durations_stop_at_a_hundred_years() -> None:
    assert parse_duration("876000h") == timedelta(hours=876_000)
    for text in ("99999999999h", "9" * 400 + "h", "-99999999999h"):
        with pytest.raises(ValueError, match="longer than a hundred years"):
            parse_duration(text)


def test_settings_refuse_numbers_out_of_range() -> None:
    for auth in (
        {"default_rpm": 2**60},
        {"personal": {"budget": float("inf")}},
        {"personal": {"budget": 1e13}},
    ):
        with pytest.raises(ValueError, match=r"out of range|not a budget"):
            Settings(auth=auth)
    assert Settings(auth={"personal": {"budget": 1e12}}).auth.personal.budget_micros == 10**18


def test_admin_bodies_refuse_numbers_out_of_range() -> None:
    OrgBody(id="o", rpm=10**12, budget=1e12)
    for fields in ({"rpm": 10**12 + 1}, {"budget": 1e308}, {"tpm": -1}, {"gpu_quota": 10**30}):
        with pytest.raises(ValueError, match="o"):
            OrgBody(id="o", **fields)
