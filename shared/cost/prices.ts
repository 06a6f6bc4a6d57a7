/**
 * The price table the cost model uses: US East (N. Virginia), USD, each figure with the page it
 * was read from. Prices change: `asOf` is the date the table was last checked against those
 * pages, and every plan and report prints it next to the figures it priced.
 *
 * Not billed separately: AWS Batch itself (you pay for the EC2 instances or Fargate tasks it
 * runs). Not modelled: free tiers (a plan prices the run as if the free tier were used up),
 * data transfer (every transfer here stays in one region), CloudWatch Logs.
 */

export interface Price {
  readonly usd: number;
  readonly unit: string;
  readonly source: string;
}

export interface Ec2Price {
  readonly onDemandPerHour: Price;
  /**
   * The largest spot discount the low end of a range assumes (0.9: spot at 10 % of on demand).
   * Spot prices move with demand: the low end is a floor, the high end (on demand) a ceiling.
   */
  readonly spotDiscountMax: number;
}

export interface ClaudePrice {
  readonly name: string;
  readonly inputPerMTok: number;
  readonly outputPerMTok: number;
  /** Cache hits and refreshes. */
  readonly cacheReadPerMTok: number;
  /** Writes to the 5-minute cache (the default; the request helpers never ask for the 1-hour one). */
  readonly cacheWrite5mPerMTok: number;
  readonly source: string;
}

export interface PriceTable {
  readonly region: string;
  /** Fargate tasks and EC2 Linux instances bill by the second, with this minimum. */
  readonly batchMinimumSeconds: number;
  /** The date every figure was last checked against its source. */
  readonly asOf: string;
  readonly aws: {
    readonly stepFunctionsPerTransition: Price;
    readonly lambdaPerRequest: Price;
    readonly lambdaPerGbSecond: Price;
    readonly fargatePerVcpuHour: Price;
    readonly fargatePerGbHour: Price;
    readonly dynamoDbPerWriteRequestUnit: Price;
    readonly dynamoDbPerReadRequestUnit: Price;
    readonly s3PerPutRequest: Price;
    readonly s3PerGetRequest: Price;
    readonly s3PerGbMonth: Price;
    readonly sesPerEmail: Price;
  };
  /** The GPU instance types the GPU compute environment allows (pipelines/steps/gpu-instances.ts). */
  readonly ec2: Readonly<Record<string, Ec2Price>>;
  /** By API model id. */
  readonly claude: Readonly<Record<string, ClaudePrice>>;
}

const SFN = 'https://aws.amazon.com/step-functions/pricing/';
const LAMBDA = 'https://aws.amazon.com/lambda/pricing/';
const FARGATE = 'https://aws.amazon.com/fargate/pricing/';
const DYNAMODB = 'https://aws.amazon.com/dynamodb/pricing/on-demand/';
const S3 = 'https://aws.amazon.com/s3/pricing/';
const SES = 'https://aws.amazon.com/ses/pricing/';
/**
 * The on-demand rates as AWS's pricing API gave them on 2026-07-20, in the generated price file
 * of AWS's Karpenter (github.com/aws/karpenter-provider-aws, pkg/providers/pricing/
 * zz_generated.pricing_aws.go); the page below shows the same rates.
 */
const EC2 = 'https://aws.amazon.com/ec2/pricing/on-demand/';
/**
 * Read 2026-12-02, with the prices of the models released since (Fable 5.2, and Sonnet 5.5's
 * cache reads at $0.10 from 2026-10-07) from Anthropic's release notes quoting that page.
 */
const CLAUDE = 'https://platform.claude.com/docs/en/about-claude/pricing';

/**
 * The low end of an EC2 range: spot at 40 % of on demand. AWS advertises "up to 90 %" off, but
 * for these GPU types the spot price history showed 50-60 % off in May 2026 and only 8-28 % off
 * in August 2026 (g6.2xlarge $0.8969, g5.2xlarge $0.8673): 60 % is a floor a run is unlikely to
 * beat, and the high end is on demand.
 */
const SPOT_DISCOUNT_MAX = 0.6;

const ec2 = (usdPerHour: number): Ec2Price => ({
  onDemandPerHour: { usd: usdPerHour, unit: 'instance-hour, Linux, on demand', source: EC2 },
  spotDiscountMax: SPOT_DISCOUNT_MAX,
});

const claude = (name: string, input: number, output: number, cacheRead: number, cacheWrite5m: number): ClaudePrice => ({
  name,
  inputPerMTok: input,
  outputPerMTok: output,
  cacheReadPerMTok: cacheRead,
  cacheWrite5mPerMTok: cacheWrite5m,
  source: CLAUDE,
});

export const PRICES: PriceTable = {
  region: 'us-east-1',
  asOf: '2026-12-02',
  batchMinimumSeconds: 60,
  aws: {
    stepFunctionsPerTransition: { usd: 0.025 / 1000, unit: 'state transition, Standard workflows', source: SFN },
    lambdaPerRequest: { usd: 0.2 / 1_000_000, unit: 'request', source: LAMBDA },
    lambdaPerGbSecond: { usd: 0.0000166667, unit: 'GB-second, x86, first tier', source: LAMBDA },
    fargatePerVcpuHour: { usd: 0.04048, unit: 'vCPU-hour, Linux/x86', source: FARGATE },
    fargatePerGbHour: { usd: 0.004445, unit: 'GB-hour, Linux/x86', source: FARGATE },
    dynamoDbPerWriteRequestUnit: { usd: 0.625 / 1_000_000, unit: 'write request unit, on demand', source: DYNAMODB },
    dynamoDbPerReadRequestUnit: { usd: 0.125 / 1_000_000, unit: 'read request unit, on demand', source: DYNAMODB },
    s3PerPutRequest: { usd: 0.005 / 1000, unit: 'PUT, COPY, POST or LIST request, S3 Standard', source: S3 },
    s3PerGetRequest: { usd: 0.0004 / 1000, unit: 'GET request, S3 Standard', source: S3 },
    s3PerGbMonth: { usd: 0.023, unit: 'GB-month, S3 Standard, first 50 TB', source: S3 },
    // Pay per use; accounts on the Essentials plan (the default for new accounts since 2026-07-21) pay $0.16 per 1,000.
    sesPerEmail: { usd: 0.1 / 1000, unit: 'outbound email, pay per use', source: SES },
  },
  ec2: {
    'g6.xlarge': ec2(0.8048),
    'g6.2xlarge': ec2(0.9776),
    'g6.4xlarge': ec2(1.3232),
    'g5.xlarge': ec2(1.006),
    'g5.2xlarge': ec2(1.212),
    'g5.4xlarge': ec2(1.624),
  },
  claude: {
    'claude-fable-5-2': claude('Claude Fable 5.2', 8, 40, 0.2, 10),
    'claude-fable-5-1': claude('Claude Fable 5.1', 10, 50, 0.25, 12.5),
    'claude-fable-5': claude('Claude Fable 5', 10, 50, 1, 12.5),
    'claude-opus-5-5': claude('Claude Opus 5.5', 4, 20, 0.2, 5),
    'claude-opus-5': claude('Claude Opus 5', 5, 25, 0.5, 6.25),
    'claude-sonnet-5-5': claude('Claude Sonnet 5.5', 2, 10, 0.1, 2.5),
    'claude-sonnet-5': claude('Claude Sonnet 5', 2, 10, 0.2, 2.5),
    /** Prompts of at most 100,000 tokens; a longer prompt bills every token of its request at $0.50 / $2.50. */
    'claude-haiku-5-5': claude('Claude Haiku 5.5', 0.1, 0.5, 0.01, 0.125),
    'claude-opus-4-5': claude('Claude Opus 4.5', 5, 25, 0.5, 6.25),
    'claude-sonnet-4-5': claude('Claude Sonnet 4.5', 3, 15, 0.3, 3.75),
    'claude-haiku-4-5': claude('Claude Haiku 4.5', 1, 5, 0.1, 1.25),
  },
};
