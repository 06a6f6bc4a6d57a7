/**
 * Closed-loop molecular discovery at a named size (default `local`: the default pool, a random
 * sample of 100, five rounds of 30 surrogate picks and 30 random ones) on the embedded runtime,
 * each batch approved by following the link in its email and posting Approve, as the approver
 * would. Reports hits against oracle calls for the surrogate and the random baseline (goal at the
 * local size: surrogate hits >= 3x random), the threshold and base rate, calibration per round,
 * and where the time went.
 *
 * Run alone with `tsx bench/molecules-discovery.ts [--size NAME]`, or call `measureDiscovery()`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { LocalRuntime } from '#infra/local/runtime.ts';
import { pipelineNamed, resolveConfig } from '#infra/cli/config.ts';
import { campaignSummary } from '#shared/molecules/discovery.ts';
import { readCampaign } from '#shared/molecules/store.ts';
import { MOLECULES_PIPELINE } from '#pipelines/molecules/stack.ts';

export interface DiscoveryFigures {
  readonly size: string;
  readonly seconds: number;
  readonly status: string;
  readonly approvals: number;
  readonly poolSize: number;
  readonly thresholdEv: number | null;
  readonly basePercent: number | null;
  readonly surrogate: { calls: number; hits: number; failed: number };
  readonly random: { calls: number; hits: number; failed: number };
  readonly sample: { calls: number; hits: number; failed: number };
  readonly hitRatio: number | null;
  readonly goal: number;
  readonly oracleCalls: number;
  readonly batchJobs: number;
  readonly rounds: {
    round: number;
    decision: string;
    hitsSurrogate: number;
    hitsRandom: number;
    mae: number | null;
    spearman: number | null;
    maeRandom: number | null;
  }[];
}

/**
 * Approves by the emailed link: GET the page, sign in to the page's app client as a member of the
 * approvers group (the runtime's stand-in for Cognito, `POST /_local/sign-in`), then POST its
 * form with Approve and the ID token, as the page's script does.
 */
async function approve(emlText: string): Promise<void> {
  const link = /https?:\/\/[^\s"<>]+\/approvals\/[A-Za-z0-9_-]+\?exp=\d+&sig=[A-Za-z0-9_-]+/.exec(emlText)?.[0];
  if (!link) throw new Error('no approval link in the email');
  const page = await (await fetch(link)).text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(page)?.[1];
  if (!csrf) throw new Error('the approval page has no form');
  const config = /<script type="application\/json" id="approval-config">([^<]*)<\/script>/.exec(page)?.[1];
  const signIn = (JSON.parse(config ?? '{}') as { signIn?: { clientId?: string; group?: string } }).signIn;
  const origin = new URL(link).origin;
  const tokens = (await (
    await fetch(`${origin}/_local/sign-in`, {
      method: 'POST',
      body: JSON.stringify({ username: 'bench', clientId: signIn?.clientId, groups: [signIn?.group ?? 'approvers'] }),
    })
  ).json()) as { id_token?: string };
  if (!tokens.id_token) throw new Error('the local sign-in gave no ID token');
  const posted = await fetch(link, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Bearer ${tokens.id_token}` },
    body: new URLSearchParams({ decision: 'approve', csrf }).toString(),
  });
  if (posted.status !== 200) throw new Error(`approval POST answered ${posted.status}`);
}

export async function measureDiscovery(size = 'local'): Promise<DiscoveryFigures> {
  const dir = mkdtempSync(join(tmpdir(), 'fp-bench-discovery-'));
  const entry = pipelineNamed(MOLECULES_PIPELINE);
  const runtime = await LocalRuntime.start({ dataDir: dir, pipelines: [entry] });
  try {
    const config = resolveConfig(entry, { size });
    let approvals = 0;
    const pending: Promise<void>[] = [];
    runtime.on('email', ({ file }: { file: string }) => {
      approvals += 1;
      pending.push(
        import('node:fs').then(({ readFileSync }) => {
          // The text part is quoted-printable: undo soft line breaks and =3D before looking for the link.
          const raw = readFileSync(file, 'utf8')
            .replace(/=\r?\n/g, '')
            .replace(/=3D/g, '=');
          return approve(raw);
        }),
      );
    });
    const t0 = performance.now();
    const record = await runtime.startExecution(MOLECULES_PIPELINE, { config }).done;
    const seconds = (performance.now() - t0) / 1000;
    await Promise.all(pending);
    if (record.status !== 'SUCCEEDED') throw new Error(`discovery run ${record.status}: ${record.error} ${record.cause}`);
    const campaign = await readCampaign((record.output as { campaignUri: string }).campaignUri);
    const s = campaignSummary(campaign);
    return {
      size,
      seconds,
      status: record.status,
      approvals,
      poolSize: campaign.pool.size,
      thresholdEv: s.threshold,
      basePercent: s.basePercent,
      surrogate: s.surrogate,
      random: s.random,
      sample: s.sample,
      hitRatio: s.hitRatio,
      goal: 3,
      oracleCalls: s.oracleCalls,
      batchJobs: runtime.counters().batchJobs,
      rounds: campaign.rounds.map((r) => ({
        round: r.round,
        decision: r.decision,
        hitsSurrogate: r.hits.exploit + r.hits.explore,
        hitsRandom: r.hits.random,
        mae: r.calibration?.mae ?? null,
        spearman: r.calibration?.spearman ?? null,
        maeRandom: r.calibrationRandom?.mae ?? null,
      })),
    };
  } finally {
    await runtime.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

export function describeDiscovery(f: DiscoveryFigures): string {
  const ratio = f.hitRatio === null ? 'random found none' : `${f.hitRatio.toFixed(1)}x (goal >= ${f.goal}x)`;
  const rounds = f.rounds
    .map(
      (r) =>
        `  round ${r.round} ${r.decision}: hits surrogate ${r.hitsSurrogate}, random ${r.hitsRandom}; MAE ${r.mae?.toFixed(3) ?? '-'} eV (random arm ${r.maeRandom?.toFixed(3) ?? '-'}), Spearman ${r.spearman?.toFixed(2) ?? '-'}`,
    )
    .join('\n');
  return (
    `molecular discovery (${f.size}): pool ${f.poolSize}, threshold ${f.thresholdEv?.toFixed(3)} eV (base rate ${f.basePercent?.toFixed(1)} % of ${f.sample.calls - f.sample.failed} sampled); ` +
    `surrogate ${f.surrogate.hits} hits / ${f.surrogate.calls} calls, random ${f.random.hits} / ${f.random.calls}: ${ratio}; ` +
    `${f.oracleCalls} oracle calls in ${f.batchJobs} jobs, ${f.approvals} approvals, ${f.seconds.toFixed(0)} s\n${rounds}`
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const at = process.argv.indexOf('--size');
  const figures = await measureDiscovery(at > 0 ? process.argv[at + 1] : 'local');
  console.log(describeDiscovery(figures));
  console.log(JSON.stringify(figures, null, 2));
}
