/**
 * The arena: the game protocol (shared/selfplay/arena.ts), the champion's cache
 * (shared/selfplay/champion.ts), the page and the HTTP handler, run in-process. DynamoDB and S3 are mocked at the SDK's edge;
 * the champions are real ONNX models built by test/fixtures/connect4/make_policy.py and played
 * with onnxruntime-node.
 */
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { GetObjectCommand, NoSuchKey, S3Client, type GetObjectCommandOutput } from '@aws-sdk/client-s3';
import { DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { APIGatewayProxyEventV2WithJWTAuthorizer, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import {
  ARENA_ENV,
  arenaErrorResponse,
  arenaSignInFromEnv,
  CHAMPION_ARTIFACT,
  CHAMPION_FILE,
  CHAMPION_RECHECK_MS,
  parseArenaRequest,
  playArenaTurn,
  replayArenaGame,
  type ArenaRequest,
} from '#shared/selfplay/arena.ts';
import { ArenaGameOverError, ArenaMoveError, ChampionUnavailable } from '#shared/selfplay/errors.ts';
import { loadOnnxPolicy, type OnnxPolicy } from '#shared/selfplay/onnx.ts';
import { Game } from '#shared/selfplay/connect4.ts';
import { ConfigError } from '#shared/errors.ts';
import type { Policy } from '#shared/selfplay/match.ts';
import { ENV } from '#shared/env.ts';
import { ChampionSource } from '#shared/selfplay/champion.ts';
import { MOVE_PATH, renderArenaPage } from '#shared/selfplay/arena-page.ts';
import { captureOutput, logLines, type OutputCapture } from '../support/output.ts';

const python = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const makePolicy = join(REPO_ROOT, 'test/fixtures/connect4/make_policy.py');
const where = { table: 'arena-table', bucket: 'arena-bucket' };

const s3 = mockClient(S3Client);
const ddb = mockClient(DynamoDBDocumentClient);
/** S3 key -> bytes, served by the GetObject mock. */
const objects = new Map<string, Buffer>();
/** The champion's index items, by version. */
const versions = new Map<number, Record<string, unknown>>();

let dir: string;
let model: (file: string) => Buffer;
/**
 * column_policy.onnx: its logits rank the columns 3, 0, 6, 1, 5, 2, 4 whatever the board. Its
 * weights are all 0, so onnxruntime returns its float32 biases exactly on every CPU, at least 1
 * apart (make_policy.py checks the gap): the exact moves asserted below cannot depend on rounding.
 */
let columnPolicy: OnnxPolicy;

/** Indexes `bytes` as champion version `version` (files under its prefix), as publishArtifact would. */
function publishChampion(version: number, bytes: Buffer, options: { fileName?: string; recordedSha256?: string } = {}): void {
  const prefix = `artifacts/${CHAMPION_ARTIFACT}/${String(version).padStart(12, '0')}/`;
  const name = options.fileName ?? CHAMPION_FILE;
  objects.set(`${prefix}${name}`, bytes);
  const sha256 = options.recordedSha256 ?? createHash('sha256').update(bytes).digest('hex');
  versions.set(version, {
    pk: `ARTIFACT#${CHAMPION_ARTIFACT}`,
    sk: `V#${String(version).padStart(12, '0')}`,
    name: CHAMPION_ARTIFACT,
    version,
    uri: `s3://${where.bucket}/${prefix}`,
    files: [{ name, uri: `s3://${where.bucket}/${prefix}${name}`, sha256, bytes: bytes.length }],
  });
}

const downloads = () => s3.commandCalls(GetObjectCommand).length;
const indexReads = () => ddb.commandCalls(QueryCommand).length;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'arena-policies-'));
  const made = spawnSync(python, [makePolicy, dir], { encoding: 'utf8', env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
  assert.equal(made.status, 0, `make_policy.py failed (needs numpy and python3-onnx):\n${made.stdout}\n${made.stderr}`);
  model = (file) => readFileSync(join(dir, file));
  columnPolicy = await loadOnnxPolicy(join(dir, 'column_policy.onnx'), { name: 'column' });
});

after(async () => {
  await columnPolicy?.release();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

beforeEach(() => {
  s3.reset();
  ddb.reset();
  objects.clear();
  versions.clear();
  s3.on(GetObjectCommand).callsFake((input: { Bucket: string; Key: string }) => {
    const bytes = input.Bucket === where.bucket ? objects.get(input.Key) : undefined;
    if (!bytes) throw new NoSuchKey({ message: `no such key ${input.Key}`, $metadata: {} });
    return { Body: Readable.from([bytes]) as unknown as GetObjectCommandOutput['Body'] };
  });
  // getArtifactVersion's latest: newest first, one item.
  ddb.on(QueryCommand).callsFake(() => {
    const newest = Math.max(...versions.keys());
    return { Items: versions.size ? [versions.get(newest)] : [] };
  });
});

/** A policy that must not be asked: the champion is not to move. */
const untouchable: Policy = {
  name: 'untouchable',
  act: () => {
    throw new Error('the champion was asked to move out of turn');
  },
};

const request = (moves: unknown[], human: 'first' | 'second' = 'first'): ArenaRequest => ({ moves, human });

/** Asserts a ConfigError subclass by name, naming `field` and showing `value` in its message. */
function rejects(error: unknown, name: string, field: string, value: string): boolean {
  assert.ok(error instanceof ConfigError, `expected ${name}, got ${String(error)}`);
  assert.equal(error.name, name);
  assert.equal(error.field, field);
  assert.ok(error.message.includes(`(got ${value})`), error.message);
  return true;
}

describe('parseArenaRequest', () => {
  it('reads the moves and the seat, from plain or base64 JSON', () => {
    const body = JSON.stringify({ moves: [3, 2], human: 'second' });
    assert.deepEqual(parseArenaRequest(body), { moves: [3, 2], human: 'second' });
    assert.deepEqual(parseArenaRequest(Buffer.from(body).toString('base64'), true), { moves: [3, 2], human: 'second' });
  });

  it('names the field of a bad request', () => {
    assert.throws(
      () => parseArenaRequest('{"moves": [3'),
      (e) => rejects(e, 'ConfigError', 'body', '"{\\"moves\\": [3"'),
    );
    assert.throws(
      () => parseArenaRequest(undefined),
      (e) => e instanceof ConfigError && e.field === 'body',
    );
    assert.throws(
      () => parseArenaRequest('{"moves": [], "human": "third"}'),
      (e) => rejects(e, 'ConfigError', 'human', '"third"'),
    );
    assert.throws(
      () => parseArenaRequest('{"moves": 3, "human": "first"}'),
      (e) => rejects(e, 'ConfigError', 'moves', '3'),
    );
    const tooMany = JSON.stringify({ moves: new Array(44).fill(0), human: 'first' });
    assert.throws(
      () => parseArenaRequest(tooMany),
      (e) => e instanceof ConfigError && e.field === 'moves' && /at most 42 moves/.test(e.message),
    );
  });
});

describe('replayArenaGame', () => {
  it('replays the moves with the rules of shared/selfplay/connect4.ts', () => {
    const moves = [3, 3, 4, 2, 0];
    const { game } = replayArenaGame(request(moves));
    assert.deepEqual(game.render(), Game.fromMoves(moves).render());
  });

  it('rejects a move into a full column, naming the move and its column', () => {
    const full = [0, 0, 0, 0, 0, 0];
    assert.throws(
      () => replayArenaGame(request([...full, 0])),
      (e) => rejects(e, 'ArenaMoveError', 'moves[6]', '0') && /column 0 is full/.test((e as Error).message),
    );
  });

  it('rejects a column off the board', () => {
    assert.throws(
      () => replayArenaGame(request([3, 7])),
      (e) => rejects(e, 'ArenaMoveError', 'moves[1]', '7'),
    );
    assert.throws(
      () => replayArenaGame(request([-1])),
      (e) => rejects(e, 'ArenaMoveError', 'moves[0]', '-1'),
    );
  });

  it('rejects a move that is not an integer', () => {
    assert.throws(
      () => replayArenaGame(request([2.5])),
      (e) => rejects(e, 'ArenaMoveError', 'moves[0]', '2.5'),
    );
    assert.throws(
      () => replayArenaGame(request([3, '4'])),
      (e) => rejects(e, 'ArenaMoveError', 'moves[1]', '"4"'),
    );
    assert.throws(
      () => replayArenaGame(request([null])),
      (e) => rejects(e, 'ArenaMoveError', 'moves[0]', 'null'),
    );
  });

  // First player: 0 0 0 0 (vertical four, at move 6); second player: 1 1 1.
  const firstWins = [0, 1, 0, 1, 0, 1, 0];

  it('rejects a move after the end, saying who won', () => {
    assert.throws(
      () => replayArenaGame(request([...firstWins, 5], 'second')),
      (e) => rejects(e, 'ArenaGameOverError', 'moves[7]', '5') && /first player won at move 6/.test((e as Error).message),
    );
  });

  it('rejects a finished game that the champion ended: there is nothing left to answer', () => {
    // The person moved second: the winning move 6 was the champion's.
    assert.throws(
      () => replayArenaGame(request(firstWins, 'second')),
      (e) => e instanceof ArenaGameOverError && e.field === 'moves',
    );
  });

  it("accepts a game that the person's own move just won, and asks the champion nothing", async () => {
    const state = await playArenaTurn(replayArenaGame(request(firstWins, 'first')), untouchable);
    assert.equal(state.status, 'won');
    assert.equal(state.winner, 'human');
    assert.equal(state.toMove, null);
    assert.equal(state.reply, null);
    assert.deepEqual(state.legalMoves, []);
  });
});

describe('playArenaTurn (the champion: column_policy.onnx, greedy)', () => {
  it('opens when the person moves second', async () => {
    const state = await playArenaTurn(replayArenaGame(request([], 'second')), columnPolicy);
    assert.equal(state.reply, 3);
    assert.deepEqual(state.moves, [3]);
    assert.equal(state.board[0]![3], 1, 'row 0 is the bottom; the first player is 1');
    assert.equal(state.toMove, 'human');
    assert.equal(state.status, 'playing');
  });

  it("answers the person's move with the best legal column", async () => {
    const state = await playArenaTurn(replayArenaGame(request([0])), columnPolicy);
    assert.equal(state.reply, 3);
    assert.deepEqual(state.moves, [0, 3]);
    assert.deepEqual(state.legalMoves, [0, 1, 2, 3, 4, 5, 6]);
  });

  it('never plays into a full column: its favourite full, it takes the next legal logit', async () => {
    // Column 3 filled by both sides; the champion (second) to move after the person's 0.
    const moves = [3, 3, 3, 3, 3, 3, 0];
    const state = await playArenaTurn(replayArenaGame(request(moves, 'first')), columnPolicy);
    assert.equal(state.reply, 0, 'after 3 the logits rank 0 next');
    assert.ok(!state.legalMoves.includes(3));
    assert.doesNotThrow(() => Game.fromMoves(state.moves));
  });

  it('plays legal moves through a whole game, and the result is seen from the person', async () => {
    // The champion opens and stacks column 3 while the person stacks column 6: the champion connects first.
    let state = await playArenaTurn(replayArenaGame(request([], 'second')), columnPolicy);
    while (state.status === 'playing') {
      state = await playArenaTurn(replayArenaGame(request([...state.moves, 6], 'second')), columnPolicy);
    }
    assert.equal(state.status, 'lost');
    assert.equal(state.winner, 'champion');
    assert.deepEqual(state.moves, [3, 6, 3, 6, 3, 6, 3]);
  });

  it("asks nothing when it is the person's turn", async () => {
    const state = await playArenaTurn(replayArenaGame(request([], 'first')), untouchable);
    assert.equal(state.toMove, 'human');
    assert.equal(state.reply, null);
  });
});

describe('arenaErrorResponse', () => {
  it('maps bad moves to 400, finished games to 409, a missing champion to 503, anything else to nothing', () => {
    assert.equal(arenaErrorResponse(new ArenaMoveError('moves[0]', 9, 'bad'))?.statusCode, 400);
    assert.equal(arenaErrorResponse(new ConfigError('human', 'x', 'bad'))?.statusCode, 400);
    assert.deepEqual(arenaErrorResponse(new ArenaGameOverError('moves[7]', 5, 'over'))?.body.field, 'moves[7]');
    assert.equal(arenaErrorResponse(new ArenaGameOverError('moves[7]', 5, 'over'))?.statusCode, 409);
    assert.equal(arenaErrorResponse(new ChampionUnavailable('none'))?.statusCode, 503);
    assert.equal(arenaErrorResponse(new Error('boom')), undefined);
  });
});

describe('arenaSignInFromEnv', () => {
  const cognito = {
    [ARENA_ENV.signIn]: 'cognito',
    [ARENA_ENV.authDomain]: 'https://arena-1.auth.eu-west-1.amazoncognito.com/',
    [ARENA_ENV.clientId]: 'client-1',
    [ARENA_ENV.pageUrl]: 'https://api.example.com/arena',
  };

  it('reads the Cognito settings, or none', () => {
    assert.deepEqual(arenaSignInFromEnv({ [ARENA_ENV.signIn]: 'none' }), { mode: 'none' });
    const signIn = arenaSignInFromEnv(cognito);
    assert.equal(signIn.mode, 'cognito');
    assert.equal(signIn.mode === 'cognito' && signIn.domain, 'https://arena-1.auth.eu-west-1.amazoncognito.com');
  });

  it('throws naming the variable that is missing or wrong', () => {
    assert.throws(
      () => arenaSignInFromEnv({ ...cognito, [ARENA_ENV.clientId]: '' }),
      (e) => e instanceof ConfigError && e.field === ARENA_ENV.clientId,
    );
    assert.throws(
      () => arenaSignInFromEnv({ [ARENA_ENV.signIn]: 'oidc' }),
      (e) => rejects(e, 'ConfigError', ARENA_ENV.signIn, '"oidc"'),
    );
  });
});

describe('renderArenaPage', () => {
  it('a public arena: no sign-in in the settings, and the page may talk to its own origin only', () => {
    const page = renderArenaPage({ signIn: { mode: 'none' }, movePath: MOVE_PATH });
    assert.match(String(page.headers?.['Content-Security-Policy']), /connect-src 'self';/);
    assert.match(String(page.body), /<script type="application\/json" id="arena-config">\{"signIn":\{"mode":"none"\},"movePath":"\/arena\/move"\}<\/script>/);
  });

  it('escapes the settings so that no value can close the data block', () => {
    const page = renderArenaPage({
      signIn: {
        mode: 'cognito',
        domain: 'https://a.example',
        clientId: '</script><script>alert(1)</script>',
        redirectUri: 'https://b.example/arena',
        scopes: ['openid'],
      },
      movePath: MOVE_PATH,
    });
    assert.doesNotMatch(String(page.body), /alert\(1\)<\/script>/);
    assert.match(String(page.body), /\\u003c\/script>\\u003cscript>alert\(1\)/);
  });
});

describe('ChampionSource', () => {
  let clock = 0;
  let source: ChampionSource;
  // Its warnings: Powertools' Logger writes them to stderr, through a console of its own.
  let output: OutputCapture | undefined;
  const warnings = () =>
    logLines(output?.text() ?? '')
      .filter((line) => line.level === 'WARN')
      .map((line) => JSON.stringify(line));

  beforeEach(() => {
    clock = 1_000_000;
    source = new ChampionSource({ where, now: () => clock });
    output?.restore();
    output = captureOutput();
  });
  after(() => {
    output?.restore();
  });

  it('is unavailable, saying what to do, before any champion is published', async () => {
    await assert.rejects(
      source.get(),
      (e: Error) => e instanceof ChampionUnavailable && /no champion has been published yet/.test(e.message) && /self-play league/.test(e.message),
    );
  });

  it('loads the latest version once, and asks the index again only after a minute', async () => {
    publishChampion(1, model('column_policy.onnx'));
    const first = await source.get();
    assert.equal(first.version, 1);
    clock += CHAMPION_RECHECK_MS - 1;
    assert.equal(await source.get(), first);
    assert.equal(indexReads(), 1, 'no index read within the minute');
    clock += 1;
    assert.equal(await source.get(), first, 'the same version: the same session');
    assert.equal(indexReads(), 2);
    assert.equal(downloads(), 1, 'no second download of the same version');
  });

  it('switches to a newer version at the next check', async () => {
    publishChampion(1, model('column_policy.onnx'));
    assert.equal((await source.get()).version, 1);
    publishChampion(2, model('mlp_policy.onnx'));
    assert.equal((await source.get()).version, 1, 'still within the minute');
    clock += CHAMPION_RECHECK_MS;
    const second = await source.get();
    assert.equal(second.version, 2);
    assert.equal(second.policy.name, `${CHAMPION_ARTIFACT} version 2`);
  });

  it('shares one load between requests that arrive together', async () => {
    publishChampion(1, model('column_policy.onnx'));
    const [a, b, c] = await Promise.all([source.get(), source.get(), source.get()]);
    assert.ok(a === b && b === c);
    assert.equal(downloads(), 1);
    assert.equal(indexReads(), 1);
  });

  it('keeps playing the current champion when a newer one cannot be loaded, and says so', async () => {
    publishChampion(1, model('column_policy.onnx'));
    await source.get();
    publishChampion(2, model('corrupt.onnx'));
    clock += CHAMPION_RECHECK_MS;
    assert.equal((await source.get()).version, 1);
    assert.match(warnings().join('\n'), /could not load selfplay-champion version 2; still playing version 1/);
  });

  it('keeps playing the current champion when the index cannot be read', async () => {
    publishChampion(1, model('column_policy.onnx'));
    await source.get();
    ddb.on(QueryCommand).rejects(Object.assign(new Error('Rate exceeded'), { name: 'ProvisionedThroughputExceededException' }));
    clock += CHAMPION_RECHECK_MS;
    assert.equal((await source.get()).version, 1);
    assert.match(warnings().join('\n'), /ProvisionedThroughputExceededException/);
  });

  it('is unavailable when the only version is not a usable model', async () => {
    publishChampion(1, model('wrong_shape.onnx'));
    await assert.rejects(
      source.get(),
      (e: Error) => e instanceof ChampionUnavailable && /version 1/.test(e.message) && /not a usable Connect Four policy/.test(e.message),
    );
  });

  it(`is unavailable when the version has no ${CHAMPION_FILE}`, async () => {
    publishChampion(1, model('column_policy.onnx'), { fileName: 'policy.onnx' });
    await assert.rejects(
      source.get(),
      (e: Error) => e instanceof ChampionUnavailable && /has no file named champion\.onnx \(files: policy\.onnx\)/.test(e.message),
    );
  });

  it('refuses bytes that differ from the sha256 recorded at publication', async () => {
    publishChampion(1, model('column_policy.onnx'), { recordedSha256: '0'.repeat(64) });
    await assert.rejects(source.get(), (e: Error) => e instanceof ChampionUnavailable && /the index recorded 0{64}/.test(e.message));
  });
});

describe('arena handler', () => {
  type Handler = (event: APIGatewayProxyEventV2WithJWTAuthorizer) => Promise<APIGatewayProxyStructuredResultV2>;
  let handler: Handler;

  before(async () => {
    Object.assign(process.env, {
      [ENV.table]: where.table,
      [ENV.bucket]: where.bucket,
      [ARENA_ENV.signIn]: 'cognito',
      [ARENA_ENV.authDomain]: 'https://arena-1.auth.eu-west-1.amazoncognito.com',
      [ARENA_ENV.clientId]: 'client-1',
      [ARENA_ENV.pageUrl]: 'https://api.example.com/arena',
    });
    ({ handler } = (await import('#functions/selfplay/arena/handler.ts')) as { handler: Handler });
  });

  const event = (routeKey: string, body?: unknown): APIGatewayProxyEventV2WithJWTAuthorizer =>
    ({
      version: '2.0',
      routeKey,
      rawPath: routeKey.split(' ')[1],
      headers: {},
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      isBase64Encoded: false,
      requestContext: { authorizer: { jwt: { claims: { sub: 'u-1', username: 'alice' }, scopes: null } } },
    }) as unknown as APIGatewayProxyEventV2WithJWTAuthorizer;
  const json = (result: APIGatewayProxyStructuredResultV2) => JSON.parse(String(result.body)) as Record<string, unknown>;

  it('serves the page with its sign-in settings and a policy that runs only its own script', async () => {
    const page = await handler(event('GET /arena'));
    assert.equal(page.statusCode, 200);
    const csp = String(page.headers?.['Content-Security-Policy']);
    assert.match(csp, /script-src 'sha256-[A-Za-z0-9+/=]+'/);
    assert.match(csp, /connect-src 'self' https:\/\/arena-1\.auth\.eu-west-1\.amazoncognito\.com/);
    const body = String(page.body);
    const script = /<script>([\s\S]*?)<\/script>/.exec(body)![1]!;
    assert.ok(csp.includes(`'sha256-${createHash('sha256').update(script).digest('base64')}'`), 'the CSP hash is the inline script');
    const config = JSON.parse(/<script type="application\/json" id="arena-config">([\s\S]*?)<\/script>/.exec(body)![1]!);
    assert.deepEqual(config.signIn, {
      mode: 'cognito',
      domain: 'https://arena-1.auth.eu-west-1.amazoncognito.com',
      clientId: 'client-1',
      redirectUri: 'https://api.example.com/arena',
      scopes: ['openid', 'email', 'profile'],
    });
    assert.doesNotMatch(body, /(src|href)="https?:/, 'no external URL');
    const root = await handler(event('GET /'));
    assert.equal(root.statusCode, 302);
    assert.equal(root.headers?.Location, '/arena');
  });

  it('answers 503 with a clear message while no champion is published', async () => {
    const result = await handler(event('POST /arena/move', { moves: [], human: 'second' }));
    assert.equal(result.statusCode, 503);
    assert.equal(json(result).error, 'ChampionUnavailable');
    assert.match(String(json(result).message), /no champion has been published yet/);
  });

  it("plays the champion's reply and names its version", async () => {
    publishChampion(4, model('column_policy.onnx'));
    const result = await handler(event('POST /arena/move', { moves: [5], human: 'first' }));
    assert.equal(result.statusCode, 200);
    const state = json(result);
    assert.deepEqual(state.moves, [5, 3]);
    assert.equal(state.reply, 3);
    assert.equal(state.status, 'playing');
    assert.deepEqual(state.champion, { artifact: CHAMPION_ARTIFACT, version: 4 });
  });

  it('answers 400 naming the field of an illegal move, 409 for a finished game, and stores nothing', async () => {
    const illegal = await handler(event('POST /arena/move', { moves: [3, 9], human: 'first' }));
    assert.equal(illegal.statusCode, 400);
    assert.deepEqual([json(illegal).error, json(illegal).field], ['ArenaMoveError', 'moves[1]']);
    const malformed = await handler(event('POST /arena/move', 'not json'));
    assert.equal(malformed.statusCode, 400);
    assert.equal(json(malformed).field, 'body');
    const over = await handler(event('POST /arena/move', { moves: [0, 1, 0, 1, 0, 1, 0, 2], human: 'first' }));
    assert.equal(over.statusCode, 409);
    assert.deepEqual([json(over).error, json(over).field], ['ArenaGameOverError', 'moves[7]']);
    assert.equal(ddb.calls().filter((c) => !(c.args[0] instanceof QueryCommand)).length, 0, 'the arena only reads the index');
  });

  it('answers 404 on a route it does not serve', async () => {
    assert.equal((await handler(event('DELETE /arena'))).statusCode, 404);
  });
});
