"""The environment's own reward, as a candidate module: -1 for every step.

The baseline that reward search has to beat. With it, PPO sees the same reward whatever it does
until some episode happens to reach the goal, which random pushing almost never does within 200
steps, so the policy usually learns nothing.
"""


def reward(obs, action, next_obs, done, info):
    return -1.0
