"""Named scorers: each maps (generations, answers) to one correctness flag per row.

The registry names a benchmark's scorer; the eval job looks it up here, so these names are
part of the benchmark registry's contract:
- exact-number: the first number in the generation (optional minus sign, digits, optional
  decimals; thousands commas dropped) equals the answer as a number. GSM8K-style.
- exact-string: the generation, stripped of surrounding whitespace, equals the answer, stripped.
- multiple-choice: the first standalone capital letter A-E in the generation equals the answer
  letter (ARC-style benchmarks, where the answer is the choice's label).
"""
from __future__ import annotations

import re
from typing import Callable

NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
CHOICE = re.compile(r"\b([A-E])\b")


class UnknownScorerError(ValueError):
    """The benchmark names a scorer that is not in SCORERS."""


def first_number(text: str) -> float | None:
    match = NUMBER.search(text)
    if match is None:
        return None
    try:
        return float(match.group(0).replace(",", ""))
    except ValueError:
        return None


def exact_number(generation: str, answer: str) -> bool:
    got, want = first_number(generation), first_number(answer)
    return got is not None and want is not None and abs(got - want) < 1e-9


def exact_string(generation: str, answer: str) -> bool:
    return generation.strip() == answer.strip()


def multiple_choice(generation: str, answer: str) -> bool:
    match = CHOICE.search(generation)
    return match is not None and match.group(1) == answer.strip()


SCORERS: dict[str, Callable[[str, str], bool]] = {
    "exact-number": exact_number,
    "exact-string": exact_string,
    "multiple-choice": multiple_choice,
}


def score(scorer: str, generations: list[str], answers: list[str]) -> list[bool]:
    """One flag per row; raises UnknownScorerError for a name not in SCORERS."""
    if scorer not in SCORERS:
        raise UnknownScorerError(f"benchmark.scorer: must be one of {', '.join(SCORERS)} (got {scorer!r})")
    if len(generations) != len(answers):
        raise ValueError(f"{len(generations)} generations for {len(answers)} answers")
    check = SCORERS[scorer]
    return [check(g, a) for g, a in zip(generations, answers)]
