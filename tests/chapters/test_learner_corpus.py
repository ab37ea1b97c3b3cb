"""The build-it-yourself checkers against an independent corpus of learner implementations (learner_corpus.py).

Every correct implementation must be accepted, every wrong one refused, and at least 90 % of the refusals
must name the slip (one of the entry's cause keywords in the verdict). The corpus's own labels are checked
first, against PyTorch references on inputs of its own, so that a failure here is the checkers', not the
corpus's. ``python scripts/measure_learner_corpus.py`` prints the same measurement as a table.
"""

import warnings

import pytest

from tests.chapters.learner_corpus import CORPUS, STEPS, matches_reference, names_cause, run_checker

CAUSE_TARGET = 0.90


@pytest.fixture(scope="module")
def verdicts():
    return {entry.name: run_checker(entry) for entry in CORPUS}


def test_corpus_size_and_mix():
    correct = [e for e in CORPUS if e.correct]
    assert len(CORPUS) >= 100
    assert len(correct) >= 30
    assert len(CORPUS) - len(correct) >= 70
    for step in STEPS:
        assert any(e.correct for e in CORPUS if e.step == step), step
        assert any(not e.correct for e in CORPUS if e.step == step), step


@pytest.mark.parametrize("entry", CORPUS, ids=lambda e: e.name)
def test_corpus_label_holds(entry):
    """The corpus's own check, without the chapter's checkers: correct ones match PyTorch, wrong ones do not."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert matches_reference(entry) == entry.correct


@pytest.mark.parametrize("entry", [e for e in CORPUS if e.correct], ids=lambda e: e.name)
def test_correct_accepted(entry, verdicts):
    verdict = verdicts[entry.name]
    assert verdict.ok, verdict.text


@pytest.mark.parametrize("entry", [e for e in CORPUS if not e.correct], ids=lambda e: e.name)
def test_wrong_rejected(entry, verdicts):
    verdict = verdicts[entry.name]
    assert not verdict.ok, f"{entry.slip}\n{verdict.text}"


def test_rejections_name_the_cause(verdicts):
    rejected = [e for e in CORPUS if not e.correct and not verdicts[e.name].ok]
    missed = [e for e in rejected if not names_cause(e, verdicts[e.name].text)]
    share = 1 - len(missed) / len(rejected)
    report = "\n\n".join(f"{e.name}: {e.slip}\n{verdicts[e.name].text}" for e in missed)
    assert share >= CAUSE_TARGET, f"{share:.0%} of the rejections name the cause; these do not:\n\n{report}"
