"""`CheckedGrammars`: a structured-output constraint that passed vLLM's checks is not checked again while it is
among the last few; the rest of the parameters always are, and a refused constraint is refused every time."""

from __future__ import annotations

import pytest
from vllm import SamplingParams
from vllm.sampling_params import StructuredOutputsParams

from vllm_responses.engine.checked_grammars import CheckedGrammars


def params(regex: str | None = None, **kwargs: object) -> SamplingParams:
    constraint = StructuredOutputsParams(regex=regex) if regex is not None else None
    return SamplingParams(structured_outputs=constraint, **kwargs)  # type: ignore[arg-type]


class Checks:
    """A stand-in for `SamplingParams.verify`: what each check saw; refuses the regex "(" and any seed 13."""

    def __init__(self) -> None:
        self.saw: list[str | None] = []

    def __call__(self, p: SamplingParams) -> None:
        constraint = p.structured_outputs
        self.saw.append(constraint.regex if constraint is not None else None)
        if constraint is not None and constraint.regex == "(":
            raise ValueError("bad regex")
        if p.seed == 13:
            raise ValueError("bad seed")


def test_a_constraint_that_passed_is_not_checked_again() -> None:
    checked, checks = CheckedGrammars(), Checks()
    checked.verify(params("ab"), checks)
    second = params("a" + "b")  # an equal constraint in new parameters
    checked.verify(second, checks)
    assert checks.saw == ["ab", None]  # the second time, the other checks only
    assert second.structured_outputs is not None and second.structured_outputs.regex == "ab"  # put back
    checked.verify(params("abc"), checks)  # another constraint is checked
    checked.verify(params(), checks)
    assert checks.saw == ["ab", None, "abc", None]


def test_the_other_checks_still_refuse() -> None:
    checked, checks = CheckedGrammars(), Checks()
    checked.verify(params("ab"), checks)
    with pytest.raises(ValueError, match="bad seed"):
        checked.verify(params("ab", seed=13), checks)


def test_a_refused_constraint_is_refused_every_time() -> None:
    checked, checks = CheckedGrammars(), Checks()
    for _ in range(2):
        with pytest.raises(ValueError, match="bad regex"):
            checked.verify(params("("), checks)
    assert checks.saw == ["(", "("]


def test_the_least_recently_used_is_forgotten_first() -> None:
    checked, checks = CheckedGrammars(kept=2), Checks()
    for regex in ("a", "b", "a", "c", "a", "b"):
        checked.verify(params(regex), checks)
    assert checks.saw == ["a", "b", None, "c", None, "b"]  # "b" was the oldest when "c" came
