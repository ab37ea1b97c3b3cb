"""The shared precision rule of the exercise checkers: ``answers.compare_number``."""

import math

import pytest

from mha.chapters.checking.answers import compare_number, named_slip, precision_unit, precision_words

DIST = 0.6 * math.sqrt(2)  # 0.8485..., the single-head-limits chapter's distance


@pytest.mark.parametrize("found", [DIST, 0.85, 0.8485, 0.849, 0.845])
def test_right_to_2_decimals_with_as_many_digits_or_more(found):
    assert compare_number(found, DIST, decimals=2) == ("right", "correct")


def test_a_value_on_the_boundary_may_be_rounded_either_way():
    for found in (0.12, 0.13, 0.125):
        assert compare_number(found, 0.125, decimals=2).right
    for found in (0.015, 0.016):  # 0.0155 to 2 significant figures
        assert compare_number(found, 0.0155, sig_figs=2).right


def test_one_decimal_fewer_is_close_and_says_how_many_to_give():
    c = compare_number(0.8, DIST, decimals=2)
    assert c.status == "close" and c.message.startswith("close: give 2 decimals (found 0.8")
    assert "0.85" not in c.message and "0.848" not in c.message  # never gives the answer away


def test_one_unit_off_in_the_last_digit_is_close_and_blames_the_rounding():
    for found in (0.84, 0.86):
        c = compare_number(found, DIST, decimals=2)
        assert c.status == "close" and "off by one" in c.message and "only at the end" in c.message
        assert "0.85" not in c.message


@pytest.mark.parametrize("found", [0.9, 0.87, 0.7, 0.6, 1.2, -0.85])
def test_wrong(found):
    assert compare_number(found, DIST, decimals=2) == ("wrong", "")


def test_significant_figures():
    target = 1 / 64  # 0.015625
    assert compare_number(0.016, target, sig_figs=2).right and compare_number(0.0156, target, sig_figs=2).right
    c = compare_number(0.02, target, sig_figs=2)
    assert c.status == "close" and "give 2 significant figures" in c.message and "0.016" not in c.message
    assert compare_number(0.017, target, sig_figs=2).status == "close"
    assert compare_number(0.01, target, sig_figs=2).status == "wrong"
    assert compare_number(0.02, target, sig_figs=1).right
    assert compare_number(0.03, target, sig_figs=1).status == "close"  # one unit off; no "0 figures"
    assert math.isclose(precision_unit(1234.0, sig_figs=2), 100.0) and precision_unit(0.5, decimals=3) == 1e-3
    assert precision_words(decimals=1) == "1 decimal" and precision_words(sig_figs=2) == "2 significant figures"


@pytest.mark.parametrize(
    "args, kwargs, error, words",
    [
        (("0.85", DIST), {"decimals": 2}, TypeError, "found must be a real number, found str"),
        ((0.85, None), {"decimals": 2}, TypeError, "expected must be a real number, found NoneType"),
        ((True, DIST), {"decimals": 2}, TypeError, "found must be a real number, found bool"),
        ((float("nan"), DIST), {"decimals": 2}, ValueError, "found must be a finite number, found nan"),
        ((0.85, math.inf), {"decimals": 2}, ValueError, "expected must be a finite number"),
        ((0.85, DIST), {}, ValueError, "exactly one of decimals= and sig_figs="),
        ((0.85, DIST), {"decimals": 2, "sig_figs": 2}, ValueError, "exactly one of"),
        ((0.85, DIST), {"decimals": -1}, ValueError, "decimals must be at least 0, found -1"),
        ((0.85, DIST), {"decimals": 2.0}, TypeError, "decimals must be a whole number, found float"),
        ((0.85, DIST), {"sig_figs": 0}, ValueError, "sig_figs must be at least 1, found 0"),
        ((0.0, 0.0), {"sig_figs": 2}, ValueError, "expected must not be 0 with sig_figs="),
    ],
)
def test_malformed_arguments_raise_naming_the_argument(args, kwargs, error, words):
    with pytest.raises(error, match=words.replace("(", r"\(").replace("=", "=")):
        compare_number(*args, **kwargs)


def test_a_slip_is_named_only_where_the_precision_tells_it_from_the_answer():
    slips = [(0.7, "the first slip"), (0.851, "the answer itself to 2 decimals"), (0.95, "a later slip")]
    assert named_slip(0.7, DIST, slips, decimals=2) == "the first slip"
    assert named_slip(0.703, DIST, slips, decimals=2) == "the first slip"  # within half a unit of it
    assert named_slip(0.851, DIST, slips, decimals=2) is None  # 0.851 is DIST to 2 decimals: no slip
    assert named_slip(0.851, DIST, slips, decimals=3) == "the answer itself to 2 decimals"
    assert named_slip(0.6, DIST, slips, decimals=2) is None
    assert named_slip(0.95, DIST, [(0.95, "first"), (0.95, "second")], decimals=2) == "first"
    assert named_slip(0.016, 1 / 64, [(0.016, "rounded")], sig_figs=2) is None
    assert named_slip(0.0625, 1 / 64, [(1 / 16, "the scale once")], sig_figs=2) == "the scale once"
