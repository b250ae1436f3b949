"""autotune.untrusted: the one reader of numbers from outside (environment, caches, databases, text)."""

from __future__ import annotations

import pytest

from autotune.errors import UserError
from autotune.untrusted import env_number, number, number_or_off


@pytest.mark.parametrize(
    "value, integer, expected",
    [
        ("12", True, 12),
        (" 7 ", True, 7),
        ("1e3", True, 1000),
        (3, True, 3),
        (2.0, True, 2),
        ("0.25", False, 0.25),
        (1.5, False, 1.5),
        ("-4", False, -4.0),
    ],
)
def test_numbers_a_user_meant_are_read(value: object, integer: bool, expected: float) -> None:
    got = number(value, name="X", integer=integer)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    "value, integer",
    [
        ("abc", False),
        ("", False),
        ("nan", False),
        ("inf", False),
        ("1e999", False),
        (float("nan"), False),
        (True, False),
        (None, False),
        ([1], False),
        ("9" * 400, True),
        (10**400, True),
        ("1.5", True),
        (1.5, True),
        ("1e30", True),
        ({"a": 1}, False),
    ],
)
def test_what_is_not_a_number_is_one_user_error(value: object, integer: bool) -> None:
    with pytest.raises(UserError) as err:
        number(value, name="AUTOTUNE_X", integer=integer, example="12")
    text = str(err.value)
    assert "AUTOTUNE_X" in text and "e.g. 12" in text and len(text) < 300


def test_bounds_are_checked_and_named() -> None:
    assert number("5", name="N", lo=1, hi=10) == 5
    with pytest.raises(UserError, match="from 1 to 10"):
        number("11", name="N", lo=1, hi=10)
    with pytest.raises(UserError, match="at least 0"):
        number(-1, name="N", lo=0)


def test_off_words_give_none_and_only_where_asked() -> None:
    assert number_or_off("OFF", name="T") is None and number_or_off("0", name="T") is None
    assert number_or_off("2.5", name="T", lo=0) == 2.5
    with pytest.raises(UserError, match="off"):
        number_or_off("-3", name="T", lo=0)
    with pytest.raises(UserError):
        number("off", name="T")


def test_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AUTOTUNE_TEST_KNOB", raising=False)
    assert env_number("AUTOTUNE_TEST_KNOB", 7, integer=True) == 7
    monkeypatch.setenv("AUTOTUNE_TEST_KNOB", "  ")
    assert env_number("AUTOTUNE_TEST_KNOB", 7, integer=True) == 7
    monkeypatch.setenv("AUTOTUNE_TEST_KNOB", "1e999")
    with pytest.raises(UserError, match="AUTOTUNE_TEST_KNOB"):
        env_number("AUTOTUNE_TEST_KNOB", 7, integer=True, lo=1)
    monkeypatch.setenv("AUTOTUNE_TEST_KNOB", "off")
    assert env_number("AUTOTUNE_TEST_KNOB", 600.0, lo=0, off=("0", "off")) is None
