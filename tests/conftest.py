"""Shared fixtures: the device under test and a CPU generator for reproducible draws."""

import os

import pytest
import torch

import mha


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` run only when MHA_DEVICE asks for CUDA."""
    wants_cuda = os.environ.get("MHA_DEVICE", "").startswith("cuda")
    skip = pytest.mark.skip(reason="needs CUDA: run with MHA_DEVICE=cuda on a GPU machine")
    for item in items:
        if "cuda" in item.keywords and not wants_cuda:
            item.add_marker(skip)


#: In CI (CI=true, as .ci/run and GitHub Actions set it) a missing prerequisite is a failure: a
#: skipped browser test or a missing cache there would pass while checking nothing.
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def skip_or_fail(reason: str, *, allow_module_level: bool = False):
    """``pytest.skip`` on a learner's machine, ``pytest.fail`` in CI."""
    if IN_CI:
        pytest.fail(f"in CI this is a failure, not a skip: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=allow_module_level)


@pytest.fixture(scope="session")
def device():
    return mha.get_device()


def randn(*shape, seed=0, dtype=torch.float32, device="cpu"):
    """Draw on the CPU with a fixed seed, then move: the same numbers on every device."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=dtype).to(device)


# Every verdict a test makes is also shown in Chinese: the translation must leave no
# English sentence (outside code, names and quoted messages) and change no number.
NUMBER = __import__("re").compile(r"\d+(?:\.\d+)?")
SHAPE = __import__("re").compile(r"\(\d+(?:, \d+)+\)")


def verdict_translation_problems(verdict) -> list[str]:
    """What is wrong with ``verdict``'s Chinese rendering (empty when nothing)."""
    from collections import Counter

    from mha.chapters.checking.verdict_i18n import english_left, width

    english, chinese = verdict.render("en"), verdict.render("zh_CN")
    problems = [f"untranslated: {run!r}" for run in english_left(chinese)]
    if Counter(NUMBER.findall(english)) != Counter(NUMBER.findall(chinese)):
        problems.append(f"the numbers differ: {NUMBER.findall(english)} vs {NUMBER.findall(chinese)}")
    shapes = [Counter(SHAPE.findall(" ".join(text.split()))) for text in (english, chinese)]
    if shapes[0] != shapes[1]:
        problems.append(f"the shapes differ: {sorted(shapes[0])} vs {sorted(shapes[1])}")
    problems += [f"wider than the page: {line!r}" for line in chinese.splitlines() if width(line) > 74]
    if problems:
        problems.append(f"in the verdict:\n{english}\n---\n{chinese}")
    return problems


#: The verdicts made since the last test ended (a module fixture's verdicts go to its first test).
MADE_VERDICTS: list = []


@pytest.fixture(autouse=True, scope="session")
def record_verdicts():
    """Records every Verdict made during the session, module and session fixtures' ones included."""
    from mha.chapters.checking.answers import Verdict

    original = Verdict.__init__

    def record(self, *args, **kwargs):
        original(self, *args, **kwargs)
        MADE_VERDICTS.append(self)

    Verdict.__init__ = record
    yield
    Verdict.__init__ = original


@pytest.fixture(autouse=True)
def verdicts_translate(record_verdicts):
    """Fails a test if a verdict made during it (or by a fixture before it) does not translate."""
    yield
    made = list(MADE_VERDICTS)
    MADE_VERDICTS.clear()
    problems = [p for verdict in made for p in verdict_translation_problems(verdict)]
    if problems:
        pytest.fail(
            "a verdict's Chinese rendering (mha/chapters/<topic>/zh_CN.json):\n" + "\n".join(problems[:6]),
            pytrace=False,
        )
