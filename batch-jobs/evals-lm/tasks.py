"""Seeded, offline data for the tiny model: English sentences, string reversal, and
GSM8K-style arithmetic word problems, with disjoint train and held-out splits.

Every example is a (prompt, completion) pair; the trainer puts the begin token before the
prompt and the stop token after the completion, and learns the completion. Benchmarks
(make_benchmarks.py) are held-out rows {id, prompt, answer} with answer == completion.

Splits are by problem identity: a problem's identity is what makes it that problem (for
arithmetic: template, name, item, operands, operation; for reversal: the word), and a hash of
the identity puts it in the held-out split (HELDOUT_PERCENT of identities) or in train.
Training generators never emit a held-out identity, so no benchmark row was seen in training.
Number pairs do recur across splits: the skill being taught is the arithmetic, as in GSM8K.
"""
from __future__ import annotations

import hashlib
import random
from collections import Counter
from dataclasses import dataclass
from typing import Callable

HELDOUT_PERCENT = 10

NAMES = ["Ann", "Ben", "Cara", "Dan", "Eva", "Finn", "Gus", "Ivy", "Jon", "Kim", "Leo", "Mia"]
PRONOUNS = {"Ann": "She", "Ben": "He", "Cara": "She", "Dan": "He", "Eva": "She", "Finn": "He",
            "Gus": "He", "Ivy": "She", "Jon": "He", "Kim": "She", "Leo": "He", "Mia": "She"}
ITEMS = ["apples", "books", "cards", "coins", "eggs", "pens", "rocks", "shells", "stamps",
         "toys", "cups", "kites"]
ADJECTIVES = ["big", "small", "red", "old", "quiet", "happy", "green", "fast", "soft", "tall"]
NOUNS = ["dog", "cat", "bird", "girl", "boy", "farmer", "teacher", "horse", "fox", "baker"]
PLACES = ["park", "garden", "river", "market", "school", "forest", "kitchen", "road"]
VERBS = ["sees", "finds", "likes", "helps", "follows", "calls", "watches", "meets"]
MOTIONS = ["walks", "runs", "sits", "waits", "sleeps", "plays", "sings"]

# Addition stories ({a} + {b}); subtraction stories ({a} - {b}, a > b) when "sub" is enabled.
ADD_TEMPLATES = [
    "{name} has {a} {item}. {pron} gets {b} more. How many {item} now?",
    "{name} found {a} {item}, then {b} more. How many in all?",
    "A box has {a} {item}. {name} adds {b}. How many {item} now?",
]
SUB_TEMPLATES = [
    "{name} has {a} {item}. {pron} gives away {b}. How many are left?",
    "A box has {a} {item}. {name} takes {b}. How many {item} now?",
]
TEXT_TEMPLATES = [
    "The {adj} {noun} {verb} the {noun2} in the {place}.",
    "{name} {motion} to the {place} with a {adj} {noun}.",
    "{name} has {n} {item} and a {adj} {noun}.",
    "In the {place} the {noun} {motion} and the {noun2} {motion2}.",
    "{name} {verb} {name2} near the {adj} {place}.",
]


class TaskError(ValueError):
    """An unknown task name or a bad task option."""


@dataclass(frozen=True)
class Example:
    id: str
    prompt: str
    completion: str


def _identity_hash(identity: str) -> int:
    return int(hashlib.sha256(identity.encode()).hexdigest()[:12], 16)


def is_heldout(identity: str) -> bool:
    return _identity_hash(identity) % 100 < HELDOUT_PERCENT


def _example_id(task: str, identity: str) -> str:
    return f"{task}-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


# ---------------------------------------------------------------- arithmetic

@dataclass(frozen=True)
class ArithmeticOptions:
    max_operand: int = 9
    operations: tuple[str, ...] = ("add",)

    def __post_init__(self) -> None:
        if isinstance(self.max_operand, bool) or not isinstance(self.max_operand, int) or not 2 <= self.max_operand <= 99:
            raise TaskError(f"max_operand: must be an integer in 2..99 (got {self.max_operand!r})")
        if not self.operations or any(op not in ("add", "sub") for op in self.operations):
            raise TaskError(f"operations: must be a non-empty list of 'add', 'sub' (got {self.operations!r})")


def _arith_templates(op: str) -> list[str]:
    return ADD_TEMPLATES if op == "add" else SUB_TEMPLATES


def arithmetic_problem(op: str, template: int, name: str, item: str, a: int, b: int) -> Example:
    identity = f"arithmetic|{op}|{template}|{name}|{item}|{a}|{b}"
    story = _arith_templates(op)[template].format(name=name, pron=PRONOUNS[name], item=item, a=a, b=b)
    answer = a + b if op == "add" else a - b
    return Example(_example_id("arithmetic", identity), f"Q: {story} A: ", str(answer))


def _arith_identity(rng: random.Random, options: ArithmeticOptions) -> tuple:
    op = rng.choice(options.operations)
    a, b = rng.randint(1, options.max_operand), rng.randint(1, options.max_operand)
    if op == "sub":
        a, b = max(a, b) + 1, min(a, b)  # a > b, so answers are positive
    return (op, rng.randrange(len(_arith_templates(op))), rng.choice(NAMES), rng.choice(ITEMS), a, b)


def arithmetic_identity_string(ident: tuple) -> str:
    return "arithmetic|" + "|".join(str(x) for x in ident)


def all_arithmetic_problems(options: ArithmeticOptions) -> list[tuple]:
    """Every identity, in a fixed order (a few tens of thousands for operands up to 9)."""
    out = []
    for op in options.operations:
        for template in range(len(_arith_templates(op))):
            for name in NAMES:
                for item in ITEMS:
                    for a in range(1, options.max_operand + 2):
                        for b in range(1, options.max_operand + 1):
                            if (op == "add" and a <= options.max_operand) or (op == "sub" and a > b):
                                out.append((op, template, name, item, a, b))
    return out


# ---------------------------------------------------------------- reversal and text

REVERSAL_MIN, REVERSAL_MAX = 3, 5
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def reversal_problem(word: str) -> Example:
    return Example(_example_id("reversal", f"reversal|{word}"), f"Reverse {word}: ", word[::-1])


def _reversal_word(rng: random.Random) -> str:
    return "".join(rng.choice(LETTERS) for _ in range(rng.randint(REVERSAL_MIN, REVERSAL_MAX)))


def text_sentence(rng: random.Random) -> Example:
    name, name2 = rng.sample(NAMES, 2)
    noun, noun2 = rng.sample(NOUNS, 2)
    motion, motion2 = rng.sample(MOTIONS, 2)
    sentence = rng.choice(TEXT_TEMPLATES).format(
        adj=rng.choice(ADJECTIVES), noun=noun, noun2=noun2, verb=rng.choice(VERBS), place=rng.choice(PLACES),
        name=name, name2=name2, motion=motion, motion2=motion2, n=rng.randint(2, 9), item=rng.choice(ITEMS))
    return Example("text", "", sentence)


# ---------------------------------------------------------------- samplers

def train_sampler(task: str, rng: random.Random, arithmetic: ArithmeticOptions | None = None) -> Callable[[], Example]:
    """A function drawing one training example of `task`, never a held-out identity."""
    if task == "text":
        return lambda: text_sentence(rng)
    if task == "reversal":
        def reversal() -> Example:
            while True:
                word = _reversal_word(rng)
                if not is_heldout(f"reversal|{word}"):
                    return reversal_problem(word)
        return reversal
    if task == "arithmetic":
        options = arithmetic or ArithmeticOptions()

        def arith() -> Example:
            while True:
                ident = _arith_identity(rng, options)
                if not is_heldout(arithmetic_identity_string(ident)):
                    return arithmetic_problem(*ident)
        return arith
    raise TaskError(f"task: must be one of text, reversal, arithmetic (got {task!r})")


def heldout_rows(task: str, count: int, seed: int = 0,
                 arithmetic: ArithmeticOptions | None = None) -> list[dict[str, str]]:
    """`count` distinct held-out rows {id, prompt, answer}, seeded."""
    rng = random.Random(f"heldout:{task}:{seed}")
    if task == "arithmetic":
        options = arithmetic or ArithmeticOptions()
        pool = [i for i in all_arithmetic_problems(options) if is_heldout(arithmetic_identity_string(i))]
        chosen = rng.sample(pool, min(count, len(pool)))
        examples = [arithmetic_problem(*i) for i in chosen]
    elif task == "reversal":
        words: dict[str, None] = {}
        while len(words) < count:
            word = _reversal_word(rng)
            if is_heldout(f"reversal|{word}"):
                words[word] = None
        examples = [reversal_problem(w) for w in words]
    else:
        raise TaskError(f"task: held-out rows exist for reversal and arithmetic (got {task!r})")
    return [{"id": e.id, "prompt": e.prompt, "answer": e.completion} for e in examples]


def commonest_answer_accuracy(answers: list[str]) -> float:
    """The accuracy of always answering the commonest answer: the floor a model must beat."""
    if not answers:
        return 0.0
    return Counter(answers).most_common(1)[0][1] / len(answers)
