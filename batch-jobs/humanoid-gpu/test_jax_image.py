"""Tests that need JAX, Brax and Playground: skipped on a machine without them, run by the image's
build (on its CPU, JAX_PLATFORMS=cpu) so a broken combination of pins fails the build, not a
GPU job hours later.

- Brax's own deterministic policy against policy_forward and the exported ONNX graph: the export
  is checked against the network that trained it, not only against our reading of it.
- params.msgpack written and read back into Brax's structures.
- Playground's G1 config: the reward names this job sets are upstream's, every override lands,
  and the env built from the task resets, steps and samples commands in the task's ranges
  (impl "jax": the warp implementation needs the GPU).
"""
from __future__ import annotations

import importlib.util
import unittest
from types import SimpleNamespace

import numpy as np

import checkpoints
import train
from test_checkpoints import run_onnx
from test_train import valid_spec

HAVE_JAX = importlib.util.find_spec("jax") is not None
HAVE_BRAX = HAVE_JAX and importlib.util.find_spec("brax") is not None
HAVE_PLAYGROUND = HAVE_BRAX and importlib.util.find_spec("mujoco_playground") is not None
NO_JAX = "JAX is not installed on this machine: the GPU job's training runs only in its image"
PRIVILEGED = 216  # any size serves here: the policy never reads the privileged observation


def brax_params(seed: int = 0, ppo=None):
    """(network, (normaliser, policy, value)) as Brax builds them, the normaliser fed real data."""
    import jax
    from brax.training.acme import running_statistics

    ppo = ppo or train.check_spec(valid_spec()).ppo
    env = SimpleNamespace(observation_size={"state": (103,), "privileged_state": (PRIVILEGED,)}, action_size=29)
    normaliser, policy, value = train.param_templates(env, ppo, seed)
    rng = np.random.default_rng(seed)
    batch = {"state": (rng.normal(0.3, 2.0, (4096, 103))).astype(np.float32),
             "privileged_state": rng.normal(0, 1, (4096, PRIVILEGED)).astype(np.float32)}
    normaliser = running_statistics.update(normaliser, batch)
    sizes = {"state": (103,), "privileged_state": (PRIVILEGED,)}
    network = train.network_factory(ppo)(sizes, 29, preprocess_observations_fn=running_statistics.normalize)
    return network, jax.device_get((normaliser, policy, value))


@unittest.skipUnless(HAVE_BRAX, NO_JAX)
class BraxParityTest(unittest.TestCase):
    def test_the_export_acts_as_brax_s_deterministic_policy(self) -> None:
        import jax
        from brax.training.agents.ppo import networks as ppo_networks

        network, params = brax_params()
        rng = np.random.default_rng(1)
        obs = {"state": rng.normal(0.3, 2.0, (32, 103)).astype(np.float32),
               "privileged_state": rng.normal(0, 1, (32, PRIVILEGED)).astype(np.float32)}
        policy = ppo_networks.make_inference_fn(network)(params, deterministic=True)
        brax_actions = np.asarray(jax.jit(policy)(obs, jax.random.PRNGKey(0))[0])
        normaliser, policy_params, _ = params
        reference = checkpoints.policy_forward(normaliser.mean["state"], normaliser.std["state"],
                                               checkpoints.policy_layers(policy_params), obs["state"])
        np.testing.assert_allclose(reference, brax_actions, atol=1e-5, rtol=0)
        exported = train.export_files(params)
        self.assertEqual(sorted(exported), ["params.msgpack", "policy.onnx"])
        np.testing.assert_allclose(run_onnx(exported["policy.onnx"], obs["state"]), brax_actions, atol=1e-5, rtol=0)
        self.assertGreater(float(np.std(brax_actions)), 0.01)

    def test_params_msgpack_round_trips_into_brax_s_structures(self) -> None:
        import jax

        _, params = brax_params(2)
        data = train.serialize_params(params)
        env = SimpleNamespace(observation_size={"state": (103,), "privileged_state": (PRIVILEGED,)}, action_size=29)
        ppo = train.check_spec(valid_spec()).ppo
        restored = jax.device_get(train.restore_params(data, train.param_templates(env, ppo), "resume"))
        for want, got in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(restored)):
            np.testing.assert_array_equal(np.asarray(want), np.asarray(got))
        self.assertEqual(int(restored[0].count.to_numpy()), 4096)
        spec = valid_spec()
        spec["ppo"]["policyHiddenLayerSizes"] = [256, 256]
        other = train.check_spec(spec).ppo
        with self.assertRaisesRegex(train.SpecError, "resume params.msgpack: its policy parameters have shapes"):
            train.restore_params(data, train.param_templates(env, other), "resume")


@unittest.skipUnless(HAVE_PLAYGROUND, NO_JAX)
class PlaygroundTest(unittest.TestCase):
    def test_the_reward_names_are_upstream_s(self) -> None:
        from mujoco_playground._src.locomotion.g1 import joystick

        self.assertEqual(set(joystick.default_config().reward_config.scales.keys()), set(train.UPSTREAM_SCALES))

    def test_every_override_lands_and_a_misspelt_one_is_refused(self) -> None:
        from mujoco_playground._src.locomotion.g1 import joystick

        spec = train.check_spec(valid_spec())
        config = joystick.default_config()
        overrides = train.playground_overrides(spec.task, spec.ppo)
        train.apply_overrides(config, overrides)
        for path, value in overrides.items():
            node = config
            for part in path.split("."):
                node = node[part]
            self.assertEqual(list(node) if isinstance(node, (list, tuple)) else node, value, path)
        for bad in ("reward_config.scales.speed", "command_config.lin_vel_x"):
            with self.assertRaisesRegex(KeyError, "has no"):
                train.apply_overrides(joystick.default_config(), {bad: 1.0})

    def test_the_env_is_the_task(self) -> None:
        import jax
        import jax.numpy as jnp
        from mujoco_playground._src import mjx_env

        if not (mjx_env.MENAGERIE_PATH / "unitree_g1").exists():
            self.skipTest("MuJoCo Menagerie's unitree_g1 is not installed (the image bundles it)")
        spec_json = valid_spec()
        spec_json["ppo"]["impl"] = "jax"  # warp needs a GPU; the task is the same
        spec = train.check_spec(spec_json)
        env = train.make_env(spec)
        self.assertEqual((env.dt, env.sim_dt, env.n_substeps, env.action_size), (0.02, 0.002, 10, 29))
        self.assertAlmostEqual(float(env.mj_model.opt.timestep), 0.002)
        self.assertEqual(tuple(env.observation_size["state"]), (103,))
        # Commands: in the task's ranges (upstream's are +-1, +-0.5, +-1), a tenth of them zero.
        commands = np.asarray(jax.jit(jax.vmap(env.sample_command))(jax.random.split(jax.random.PRNGKey(0), 20_000)))
        moving = commands[np.any(commands != 0, axis=1)]
        self.assertTrue(np.all((moving[:, 0] >= 0) & (moving[:, 0] <= 2.5)))
        self.assertGreater(float(moving[:, 0].max()), 2.4)
        self.assertTrue(np.all(np.abs(moving[:, 1]) <= 0.25) and np.all(np.abs(moving[:, 2]) <= 0.5))
        self.assertAlmostEqual(1 - len(moving) / len(commands), 0.1, delta=0.01)
        state = jax.jit(env.reset)(jax.random.PRNGKey(1))
        state = jax.jit(env.step)(state, jnp.zeros(29))
        self.assertEqual(state.obs["state"].shape, (103,))
        self.assertTrue(bool(jnp.isfinite(state.reward)))
        rough = dict(spec_json, ppo=dict(spec_json["ppo"], terrain="rough"))
        self.assertEqual(train.make_env(train.check_spec(rough)).action_size, 29)


if __name__ == "__main__":
    unittest.main()
