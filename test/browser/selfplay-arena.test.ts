/**
 * The arena end to end, in headless Chromium, on the embedded runtime: a stack holding only the
 * Arena (with its user pool, client and JWT authorizer) beside the platform, a champion published
 * to the local artifact index, and a person who signs in through the local stand-in for Cognito's
 * managed login (authorization code + PKCE, as on AWS) and plays a whole game by clicking columns.
 * Then the API's edges, by hand: no token, a forged one, an illegal move, a move after the end.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import type { Browser, Page } from 'playwright-core';
import { z } from 'zod';
import type { LocalRuntime } from '#infra/local/runtime.ts';
import type { PipelineEntry } from '#infra/registry.ts';
import { Arena } from '#pipelines/selfplay/arena.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import type { StepResources } from '#pipelines/steps/resources.ts';
import { CHAMPION_ARTIFACT, CHAMPION_FILE } from '#shared/selfplay/arena.ts';
import { publishArtifact } from '#shared/artifacts.ts';
import { s3Client } from '#shared/clients/aws.ts';
import { Game } from '#shared/selfplay/connect4.ts';
import { seededRandom } from '#shared/random.ts';
import { captureOutput, logLines, startTestRuntime, stopTestRuntime, waitFor, type OutputCapture } from '../support/runtime.ts';
import { launchChromium } from '../support/browser.ts';

const TEST_TIMEOUT_MS = 60_000;
const python = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

class ArenaStack extends Stack {
  constructor(scope: Construct, id: string, props: StackProps & { resources: StepResources }) {
    super(scope, id, props);
    new Arena(this, 'Arena', { resources: props.resources });
  }
}

const ARENA_APP: readonly PipelineEntry[] = [
  {
    name: 'arena',
    stackId: 'ArenaBrowserTest',
    description: 'the arena alone (test)',
    config: z.object({}),
    smoke: {},
    create: (scope, id, props) => new ArenaStack(scope, id, props),
  },
];

let rt: LocalRuntime;
let browser: Browser;
let output: OutputCapture;
let policies: string;
let arenaUrl: string;
let moveUrl: string;

/** What the page shows once the game is over; filled by the first test, used by the next ones. */
let finished: { moves: number[]; status: string; accessToken: string } | undefined;

async function publishChampion(file: string): Promise<number> {
  const where = { table: rt.resources.tables[0]!, bucket: rt.resources.buckets[0]! };
  const key = `data/arena-test/${file}`;
  await s3Client().send(new PutObjectCommand({ Bucket: where.bucket, Key: key, Body: readFileSync(join(policies, file)) }));
  const artifact = await publishArtifact(
    { name: CHAMPION_ARTIFACT, pipeline: 'selfplay', executionId: 'arena-browser-test', files: [{ uri: `s3://${where.bucket}/${key}`, name: CHAMPION_FILE }] },
    where,
  );
  return artifact.version;
}

/** Waits until the page is not waiting for the server (the new-game buttons come back). */
async function settled(page: Page): Promise<void> {
  await page.waitForFunction(() => document.body.dataset.ready === 'true' && !(document.getElementById('new-first') as HTMLButtonElement).disabled);
}

async function shownMoves(page: Page): Promise<number[]> {
  return JSON.parse((await page.locator('#moves').getAttribute('data-moves')) ?? '[]') as number[];
}

/** Clicks a column and waits for the champion's answer to arrive and show. */
async function dropInto(page: Page, column: number): Promise<number> {
  const [response] = await Promise.all([page.waitForResponse((r) => r.request().method() === 'POST' && r.url() === moveUrl), page.click(`#drop-${column}`)]);
  await settled(page);
  return response.status();
}

const post = (body: unknown, token?: string) =>
  fetch(moveUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });

before(async () => {
  policies = mkdtempSync(join(tmpdir(), 'arena-browser-'));
  const made = spawnSync(python, [join(REPO_ROOT, 'test/fixtures/connect4/make_policy.py'), policies], {
    encoding: 'utf8',
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
  });
  assert.equal(made.status, 0, `make_policy.py failed (needs numpy and python3-onnx):\n${made.stdout}\n${made.stderr}`);
  output = captureOutput();
  rt = await startTestRuntime({ pipelines: ARENA_APP });
  arenaUrl = `${rt.approvalApiUrl}/arena`;
  moveUrl = `${arenaUrl}/move`;
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await stopTestRuntime(rt);
  output?.restore();
  if (policies) rmSync(policies, { recursive: true, force: true });
});

describe('arena in a browser', () => {
  it('signs in through the local managed login and plays a whole game to a result', { timeout: TEST_TIMEOUT_MS }, async () => {
    const version = await publishChampion('mlp_policy.onnx');
    const page = await browser.newPage();
    const pageErrors: string[] = [];
    page.on('pageerror', (error) => pageErrors.push(error.message));
    page.on('console', (message) => {
      if (message.type() === 'error') pageErrors.push(message.text());
    });
    try {
      assert.equal((await page.goto(arenaUrl))?.status(), 200);
      await page.waitForFunction(() => document.body.dataset.ready === 'true');
      assert.ok(await page.locator('#signed-out').isVisible(), 'a signed-out visitor is offered sign-in');
      assert.ok(await page.locator('#game').isHidden());

      // Sign in: to the managed-login stand-in, a user name, back with a code, exchanged with PKCE.
      await page.click('#sign-in');
      await page.waitForSelector('#local-sign-in');
      const authorize = new URL(page.url());
      assert.match(authorize.pathname, /^\/_local\/cognito\/[^/]+\/oauth2\/authorize$/);
      assert.equal(authorize.searchParams.get('code_challenge_method'), 'S256');
      assert.equal(authorize.searchParams.get('redirect_uri'), arenaUrl);
      await page.fill('#username', 'alice');
      await page.click('#local-sign-in');
      await page.waitForURL(arenaUrl);
      await page.waitForFunction(() => document.body.dataset.ready === 'true');
      assert.equal(await page.locator('#who').textContent(), 'Signed in as alice');
      assert.ok(await page.locator('#game').isVisible());

      await page.click('#new-first');
      await settled(page);
      assert.match((await page.locator('#champion').textContent()) ?? '', new RegExp(`${CHAMPION_ARTIFACT} version ${version}$`));
      const random = seededRandom(7);
      for (let turn = 0; turn < 21; turn++) {
        if ((await page.locator('#status').getAttribute('data-status')) !== 'playing') break;
        const enabled: number[] = [];
        for (let c = 0; c < 7; c++) if (await page.locator(`#drop-${c}`).isEnabled()) enabled.push(c);
        assert.ok(enabled.length > 0, 'a game still playing offers a column');
        assert.equal(await dropInto(page, enabled[Math.floor(random() * enabled.length)]!), 200, (await page.locator('#error').textContent()) ?? '');
      }
      const status = (await page.locator('#status').getAttribute('data-status')) ?? '';
      assert.ok(['won', 'lost', 'draw'].includes(status), `the game ended with a result (status ${status})`);
      assert.match((await page.locator('#status').textContent()) ?? '', /^(You won!|The champion won\.|Draw: the board is full\.)$/);

      // Every move shown is legal, and the board shown is the board those moves make.
      const moves = await shownMoves(page);
      const game = Game.fromMoves(moves);
      assert.ok(game.done, 'the moves shown end the game');
      assert.equal(status, game.winner === 0 ? 'draw' : game.winner === 1 ? 'won' : 'lost', 'the person moved first');
      for (let row = 0; row < 6; row++) {
        for (let col = 0; col < 7; col++) {
          const shown = (await page.locator(`#cell-${row}-${col}`).getAttribute('class')) ?? '';
          const expected = { 1: 'first', [-1]: 'second', 0: '' }[game.cell(row, col)]!;
          assert.equal(shown.split(' ').includes('first') ? 'first' : shown.split(' ').includes('second') ? 'second' : '', expected, `cell ${row},${col}`);
        }
      }
      for (let c = 0; c < 7; c++) assert.ok(await page.locator(`#drop-${c}`).isDisabled(), `column ${c} closed after the end`);

      // The Lambda received the signed-in user's claims from the authorizer.
      await waitFor('the game-over log line', () => logLines(output.text()).some((line) => line.message === 'arena game over' && line.player === 'alice'));
      assert.deepEqual(pageErrors, []);
      const accessToken = await page.evaluate(() => (JSON.parse(sessionStorage.getItem('arena.session') ?? '{}') as { accessToken: string }).accessToken);
      finished = { moves, status, accessToken };

      // Sign out: through the logout endpoint, back to the page, signed out.
      await page.click('#sign-out');
      await page.waitForURL(arenaUrl);
      await page.waitForFunction(() => document.body.dataset.ready === 'true');
      assert.ok(await page.locator('#signed-out').isVisible());
    } finally {
      await page.close();
    }
  });

  it('refuses a move without a valid token (401) as API Gateway does', { timeout: TEST_TIMEOUT_MS }, async () => {
    const none = await post({ moves: [], human: 'second' });
    assert.equal(none.status, 401);
    assert.deepEqual(await none.json(), { message: 'Unauthorized' });
    const garbage = await post({ moves: [], human: 'second' }, 'not-a-token');
    assert.equal(garbage.status, 401);
    // A token for another user with the signature of the real one: the payload no longer matches.
    const token = (await (await fetch(`${rt.approvalApiUrl}/_local/sign-in`, { method: 'POST', body: '{"username":"bob"}' })).json()) as {
      access_token: string;
    };
    const [head, , signature] = token.access_token.split('.');
    const claims = JSON.parse(Buffer.from(token.access_token.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
    const forged = `${head}.${Buffer.from(JSON.stringify({ ...claims, username: 'mallory' })).toString('base64url')}.${signature}`;
    assert.equal((await post({ moves: [], human: 'second' }, forged)).status, 401);
    assert.equal((await post({ moves: [], human: 'second' }, token.access_token)).status, 200, 'the untouched token works');
  });

  it('answers an illegal move with 400 naming the field, and a move after the end with 409', { timeout: TEST_TIMEOUT_MS }, async () => {
    assert.ok(finished, 'the game of the first test finished');
    const { moves, accessToken } = finished;
    const full = await post({ moves: [0, 0, 0, 0, 0, 0, 0], human: 'first' }, accessToken);
    assert.equal(full.status, 400);
    const fullBody = (await full.json()) as { error: string; field: string; message: string };
    assert.deepEqual([fullBody.error, fullBody.field], ['ArenaMoveError', 'moves[6]']);
    assert.match(fullBody.message, /column 0 is full/);
    const offBoard = (await (await post({ moves: [3, 7], human: 'first' }, accessToken)).json()) as { field: string; message: string };
    assert.equal(offBoard.field, 'moves[1]');
    assert.match(offBoard.message, /integer from 0 to 6 \(got 7\)/);

    // Any column: after the end, every move is refused as such, before any other rule.
    const late = await post({ moves: [...moves, 3], human: 'first' }, accessToken);
    assert.equal(late.status, 409);
    const lateBody = (await late.json()) as { error: string; field: string; message: string };
    assert.deepEqual([lateBody.error, lateBody.field], ['ArenaGameOverError', `moves[${moves.length}]`]);
    assert.match(lateBody.message, /already over/);
  });
});
