/**
 * The arena's champion: the latest version of the `selfplay-champion` artifact, its
 * `champion.onnx` loaded as a policy, kept for the container's life.
 *
 * - One session per artifact version: a warm container downloads and builds a session once, and
 *   again only when a newer version is published.
 * - The index is asked for the latest version at most once per `recheckMs` (60 s), so a move
 *   costs no DynamoDB read in between, and a new champion is playing within a minute.
 * - Requests that arrive while a load is in flight share it.
 * - A failed re-check (a throttled read) or a broken new version keeps the current champion
 *   playing and is logged; without any champion it is ChampionUnavailable (HTTP 503), with a
 *   message that says what to do.
 * - The bytes are checked against the sha256 the index recorded, so a model overwritten in S3
 *   after publication is refused rather than played under the version's name.
 *
 * A Lambda container runs one request at a time, so the replaced session is released at once.
 *
 * playArenaMove is the arena's move request: the game replayed, the champion's reply, and a log
 * line (`arena game over`, with the player) when the game ends.
 */
import { getArtifactVersion, type ArtifactVersion, type IndexLocation } from '../artifacts.ts';
import { readObjectBytes } from '../clients/aws.ts';
import { NotFoundError, errorName } from '../errors.ts';
import { sha256Hex } from '../json.ts';
import { logger } from '../log.ts';
import { CHAMPION_ARTIFACT, CHAMPION_FILE, CHAMPION_RECHECK_MS, playArenaTurn, replayArenaGame, type ArenaRequest, type ArenaState } from './arena.ts';
import { ChampionUnavailable } from './errors.ts';
import { loadOnnxPolicy, type OnnxPolicy } from './onnx.ts';

export interface Champion {
  readonly version: number;
  readonly policy: OnnxPolicy;
}

export interface ChampionSourceOptions {
  readonly where: IndexLocation;
  /** Default: CHAMPION_RECHECK_MS. */
  readonly recheckMs?: number;
  /** Milliseconds clock; tests pass their own. Default: Date.now. */
  readonly now?: () => number;
}

export class ChampionSource {
  private current: Champion | undefined;
  private checkedAt = Number.NEGATIVE_INFINITY;
  private pending: Promise<Champion> | undefined;
  private readonly recheckMs: number;
  private readonly now: () => number;

  constructor(private readonly options: ChampionSourceOptions) {
    this.recheckMs = options.recheckMs ?? CHAMPION_RECHECK_MS;
    this.now = options.now ?? Date.now;
  }

  /** The champion to play now (module comment). */
  get(): Promise<Champion> {
    if (this.current && this.now() - this.checkedAt < this.recheckMs) return Promise.resolve(this.current);
    this.pending ??= this.refresh().finally(() => (this.pending = undefined));
    return this.pending;
  }

  private async refresh(): Promise<Champion> {
    let latest: ArtifactVersion;
    try {
      latest = await getArtifactVersion(this.options.where, CHAMPION_ARTIFACT);
    } catch (error) {
      if (error instanceof NotFoundError) {
        throw new ChampionUnavailable(
          `no champion has been published yet: artifact "${CHAMPION_ARTIFACT}" has no versions; run the self-play league to publish one`,
        );
      }
      return this.keepCurrent('could not read the artifact index', error);
    }
    this.checkedAt = this.now();
    if (this.current?.version === latest.version) return this.current;
    let loaded: Champion;
    try {
      loaded = { version: latest.version, policy: await loadChampion(latest) };
    } catch (error) {
      return this.keepCurrent(`could not load ${CHAMPION_ARTIFACT} version ${latest.version}`, error);
    }
    const replaced = this.current;
    this.current = loaded;
    await replaced?.policy.release().catch(() => undefined);
    return loaded;
  }

  /** After a failed check or load: the current champion if there is one, else the error as a 503. */
  private keepCurrent(what: string, error: unknown): Champion {
    const message = error instanceof Error ? error.message : String(error);
    if (this.current) {
      // Checked, even though it failed: retrying on every request would hammer a struggling service.
      this.checkedAt = this.now();
      logger.warn(`${what}; still playing version ${this.current.version}`, { error: errorName(error), detail: message });
      return this.current;
    }
    if (error instanceof ChampionUnavailable) throw error;
    throw new ChampionUnavailable(`${what}: ${message}`, { cause: error });
  }
}

/** Downloads the version's champion.onnx, checks its sha256 and loads it. */
async function loadChampion(artifact: ArtifactVersion): Promise<OnnxPolicy> {
  const label = `${CHAMPION_ARTIFACT} version ${artifact.version}`;
  const file = artifact.files.find((f) => f.name === CHAMPION_FILE);
  if (!file) {
    throw new ChampionUnavailable(`${label} has no file named ${CHAMPION_FILE} (files: ${artifact.files.map((f) => f.name).join(', ') || 'none'})`);
  }
  const bytes = await readObjectBytes(file.uri, `${label} ${CHAMPION_FILE}`);
  const sha256 = sha256Hex(bytes);
  if (sha256 !== file.sha256) {
    throw new ChampionUnavailable(`${label}: ${file.uri} has sha256 ${sha256}, but the index recorded ${file.sha256} at publication`);
  }
  return loadOnnxPolicy(bytes, { name: label });
}

/** The arena's state after the champion's reply (when it is to move), with the champion's version. */
export interface ArenaMoveResult extends ArenaState {
  readonly champion: { readonly artifact: string; readonly version: number };
}

/**
 * One move request of the arena (arena.ts: its steps and errors). `player` is who is playing, as
 * the sign-in names them (a JWT claim), for the log line.
 */
export async function playArenaMove(champions: ChampionSource, request: ArenaRequest, player: unknown): Promise<ArenaMoveResult> {
  const arena = replayArenaGame(request);
  const champion = await champions.get();
  const state = await playArenaTurn(arena, champion.policy);
  if (state.status !== 'playing') {
    logger.info('arena game over', { player, result: state.status, human: state.human, plies: state.moves.length, championVersion: champion.version });
  }
  return { ...state, champion: { artifact: CHAMPION_ARTIFACT, version: champion.version } };
}
