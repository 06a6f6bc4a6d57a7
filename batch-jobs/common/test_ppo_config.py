"""The shared PPO config (ppo_config.py): the base fields' validation, from_dict/to_dict, and what
a job's subclass inherits. Each job's test_ppo.py tests its own defaults and fields."""
import dataclasses
import json
import unittest
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ppo_config import PPOConfig, PPOConfigError, positive_int

BASE_FIELDS = ["learning_rate", "gamma", "gae_lambda", "clip", "vf_coef", "ent_coef", "max_grad_norm",
               "update_epochs", "minibatches", "normalize_advantages"]


@dataclass(frozen=True)
class JobConfig(PPOConfig):
    """A job's subclass as the jobs write it: one default re-declared, one field of its own."""

    json_name: ClassVar[str] = "job ppo"
    update_epochs: int = 7
    horizon: int = 16

    def __post_init__(self) -> None:
        super().__post_init__()
        positive_int("horizon", self.horizon)


class ValidationTest(unittest.TestCase):
    def test_out_of_range_fields_are_named_with_their_values(self):
        cases = [
            ("clip", 0.0), ("clip", -0.1), ("clip", 1.0), ("gamma", 0.0), ("gamma", 1.01), ("gamma", "0.9"),
            ("gae_lambda", -0.5), ("gae_lambda", 1.5), ("learning_rate", 0.0), ("learning_rate", float("nan")),
            ("learning_rate", float("inf")), ("learning_rate", None), ("vf_coef", -1.0), ("ent_coef", -0.01),
            ("max_grad_norm", 0.0), ("max_grad_norm", True), ("update_epochs", 0), ("update_epochs", 2.5),
            ("minibatches", True), ("minibatches", np.int64(0)), ("normalize_advantages", "yes"),
            ("normalize_advantages", 1),
        ]
        for field, value in cases:
            with self.subTest(field=field, value=value):
                with self.assertRaises(PPOConfigError) as caught:
                    PPOConfig(**{field: value})
                message = str(caught.exception)
                self.assertTrue(message.startswith(f"{field}: "), message)
                self.assertIn(repr(value), message)

    def test_edges_and_numpy_numbers_that_are_allowed(self):
        PPOConfig(gamma=1.0, gae_lambda=0.0, vf_coef=0.0, ent_coef=0.0)
        PPOConfig(gae_lambda=1.0, clip=0.99, update_epochs=1, minibatches=1)
        PPOConfig(learning_rate=np.float32(1e-3), update_epochs=np.int64(3), vf_coef=1)

    def test_is_a_value_error_and_frozen(self):
        self.assertTrue(issubclass(PPOConfigError, ValueError))
        with self.assertRaises(dataclasses.FrozenInstanceError):
            PPOConfig().clip = 0.1


class JsonTest(unittest.TestCase):
    def test_to_dict_is_every_field_in_order_and_round_trips_through_json(self):
        config = PPOConfig(clip=0.1, update_epochs=2)
        self.assertEqual(list(config.to_dict()), BASE_FIELDS)
        self.assertEqual(PPOConfig.from_dict(json.loads(json.dumps(config.to_dict()))), config)

    def test_from_dict_rejects_unknown_fields_and_non_objects(self):
        with self.assertRaisesRegex(PPOConfigError, r"^ppo: unknown field\(s\) \['clip_range', 'zz'\]$"):
            PPOConfig.from_dict({"clip_range": 0.2, "zz": 1, "clip": 0.1})
        with self.assertRaisesRegex(PPOConfigError, r"^ppo: expected an object \(got list\)$"):
            PPOConfig.from_dict([])

    def test_from_dict_validates_the_values(self):
        with self.assertRaisesRegex(PPOConfigError, r"^clip: must be in \(0, 1\) \(got 1\.5\)$"):
            PPOConfig.from_dict({"clip": 1.5})


class SubclassTest(unittest.TestCase):
    def test_a_job_subclass_keeps_the_base_validation_and_adds_its_own(self):
        config = JobConfig()
        self.assertEqual((config.update_epochs, config.horizon, config.clip), (7, 16, 0.2))
        # A re-declared default keeps the base's place; the job's own fields come after.
        self.assertEqual(list(config.to_dict()), BASE_FIELDS + ["horizon"])
        with self.assertRaisesRegex(PPOConfigError, r"^clip: "):
            JobConfig(clip=0.0)
        with self.assertRaisesRegex(PPOConfigError, r"^horizon: must be a positive integer \(got 0\)$"):
            JobConfig(horizon=0)

    def test_from_dict_builds_the_subclass_and_names_it_in_errors(self):
        config = JobConfig.from_dict({"horizon": 4, "clip": 0.3})
        self.assertIs(type(config), JobConfig)
        self.assertEqual(JobConfig.from_dict(config.to_dict()), config)
        with self.assertRaisesRegex(PPOConfigError, r"^job ppo: unknown field\(s\) \['horizn'\]$"):
            JobConfig.from_dict({"horizn": 4})
        with self.assertRaisesRegex(PPOConfigError, r"^ppo: unknown field\(s\) \['horizon'\]$"):
            PPOConfig.from_dict({"horizon": 4})  # the base does not know a job's fields


if __name__ == "__main__":
    unittest.main()
