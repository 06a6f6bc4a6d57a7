"""A person-written shaped reward for MountainCar: the environment's -1 per step, plus the gain
in the car's mechanical energy, plus a bonus for reaching the goal.

Why energy: the car cannot climb the right hill directly; it must swing to build up energy, and
the energy gained in a step is roughly the push times the velocity, so pushing in the direction
of motion pays at once, long before the goal is ever reached.

    energy(x, v) = 0.5 * v^2 + (GRAVITY / 3) * (sin(3x) + 1)
        The per-step dynamics accelerate by -GRAVITY * cos(3x), whose potential is
        (GRAVITY / 3) * sin(3x); + 1 makes the valley floor (x = -pi/6, at rest) 0.
    scaled to ENERGY_GOAL = energy at rest at the goal (x = 0.5), so "enough energy" is about 1.

    reward = -1 + ENERGY_WEIGHT * (energy(next) - energy(obs)) / ENERGY_GOAL
             + GOAL_BONUS if the step reached the goal

Over an episode the energy terms add up to ENERGY_WEIGHT * (final - initial energy) / ENERGY_GOAL,
so the shaping cannot be farmed by swinging back and forth: only a net gain pays. The goal bonus
and -1 per step keep "reach the goal, quickly" the best thing to do.
"""
import math

GRAVITY = 0.0025
ENERGY_WEIGHT = 100.0
GOAL_BONUS = 100.0
ENERGY_GOAL = (GRAVITY / 3) * (math.sin(1.5) + 1)


def energy(position, velocity):
    return 0.5 * velocity * velocity + (GRAVITY / 3) * (math.sin(3 * position) + 1)


def reward(obs, action, next_obs, done, info):
    gain = (energy(*next_obs) - energy(*obs)) / ENERGY_GOAL
    return -1.0 + ENERGY_WEIGHT * gain + (GOAL_BONUS if info["goal_reached"] else 0.0)
