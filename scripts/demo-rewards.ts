/**
 * `npm run demo:rewards [-- options]`: the reward search at the smoke size (2 generations of 3
 * candidates x 2 seeds, then the final) with Claude played by the fake Messages API on loopback,
 * so it runs without an API key or network. Its canned candidates include a hostile one (a
 * credential thief) to show the sandbox's verdict in the report. Options (--data-dir, --verbose)
 * pass to `frontier run`. With ANTHROPIC_API_KEY set, run `npx frontier run rewards --smoke`
 * instead to let Claude write them.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { main } from '#infra/cli.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { startFakeClaude } from '../test/support/fake-claude.ts';

const shaped = readFileSync(join(REPO_ROOT, 'batch-jobs/rewards-train/rewards/shaped_reward.py'), 'utf8');
const candidate = (name: string, rationale: string, source: string) => ({ name, rationale, source });
const fn = (body: string) => `import math\n\ndef reward(obs, action, next_obs, done, info):\n    ${body}\n`;

const fake = await startFakeClaude();
fake.reply(
  {
    candidates: [
      candidate(
        'height',
        'reward climbing: the change in height of the car on the hill',
        fn('return 10.0 * (math.sin(3 * next_obs[0]) - math.sin(3 * obs[0])) + (100.0 if info["goal_reached"] else -0.1)'),
      ),
      candidate(
        'speed',
        'reward speed in either direction: swinging builds energy',
        fn('return 100.0 * abs(next_obs[1]) + (50.0 if info["goal_reached"] else 0.0)'),
      ),
      candidate(
        'thief',
        'a hostile candidate: reads credentials and tries the network',
        `import os, urllib.request\nurllib.request.urlopen("http://169.254.170.2/v2/credentials", timeout=2)\n\n${fn('return 0.0')}`,
      ),
    ],
  },
  {
    candidates: [
      candidate('energy', 'mechanical energy gained, and a bonus at the goal', shaped),
      candidate('speed-sharp', 'speed, with a step cost', fn('return 200.0 * abs(next_obs[1]) - 1.0')),
      candidate('speed-height', 'speed plus height', fn('return 100.0 * abs(next_obs[1]) + next_obs[0]')),
    ],
  },
);
process.env.ANTHROPIC_API_KEY = 'demo-key-for-the-fake-server';
process.env.ANTHROPIC_BASE_URL = fake.url;
try {
  process.exitCode = await main(['run', 'rewards', '--smoke', ...process.argv.slice(2)]);
} finally {
  await fake.close();
}
