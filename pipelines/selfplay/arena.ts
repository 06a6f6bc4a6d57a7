/**
 * The arena: a web page where a signed-in person plays Connect Four against the league's
 * champion (the latest `selfplay-champion` artifact version).
 *
 * 1. An HTTP API with a throttled `$default` stage and JSON access logs.
 * 2. One function (functions/selfplay/arena) with onnxruntime-node, serving `GET /arena` (the
 *    page), `GET /` (a redirect to it) and `POST /arena/move` (the champion's reply). It reads the
 *    artifact index and the champion's files, nothing else, and writes nothing.
 * 3. By default, sign-in (a PageSignIn): a Cognito user pool (no self sign-up: admins create the
 *    accounts), a public app client for the page (authorization code + PKCE, no secret), a
 *    managed-login domain, and a JWT authorizer on the move route. The page routes stay public so that the
 *    page can offer sign-in.
 *    `public: true` (context flag `arenaPublic`, see `arenaPublicFromContext`) builds no user pool
 *    and no authorizer: anyone with the URL can play, within the stage's throttle.
 *
 * Outputs: ArenaUrl, ArenaSignInUrl (the page, starting sign-in at once) and ArenaUserPoolId.
 * One Arena per stack: the outputs have fixed names.
 */
import { CfnOutput, Duration, RemovalPolicy, Token } from 'aws-cdk-lib';
import { HttpApi, HttpMethod, LogGroupLogDestination } from 'aws-cdk-lib/aws-apigatewayv2';
import type { HttpJwtAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import type { UserPool, UserPoolClient, UserPoolDomain } from 'aws-cdk-lib/aws-cognito';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { LogGroup } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { join } from 'node:path';
import { ARENA_ENV, ARENA_SCOPES, CHAMPION_ARTIFACT } from '#shared/selfplay/arena.ts';
import { ConfigError } from '#shared/errors.ts';
import { contextFlag } from '#pipelines/steps/context-flag.ts';
import { artifactVersionKey } from '#shared/table.ts';
import { ENV } from '#shared/env.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { PipelineFunction } from '#pipelines/steps/function.ts';
import { httpAccessLogFormat } from '#pipelines/steps/access-log.ts';
import { acknowledgeFindings, iam5Resource, type NagFinding } from '#pipelines/steps/nag-findings.ts';
import { PageSignIn, stackDomainPrefix } from '#pipelines/steps/page-sign-in.ts';
import type { StepResources } from '#pipelines/steps/resources.ts';

/** CDK context flag that makes the arena public: `cdk deploy -c arenaPublic=true`. */
export const ARENA_PUBLIC_CONTEXT = 'arenaPublic';

const ENTRY = join(REPO_ROOT, 'functions', 'selfplay', 'arena', 'handler.ts');
/** Cognito's rule for a domain prefix, plus the words it reserves. */
const DOMAIN_PREFIX = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const RESERVED_IN_PREFIX = ['aws', 'amazon', 'cognito'];

/**
 * The `arenaPublic` context flag as a boolean: absent = false. Accepts true/false and, as
 * `-c arenaPublic=true` passes them, the strings "true"/"false"; anything else throws.
 */
export function arenaPublicFromContext(scope: Construct): boolean {
  return contextFlag(scope, ARENA_PUBLIC_CONTEXT, false, 'cdk deploy -c arenaPublic=true');
}

export interface ArenaProps {
  /** The platform: the arena reads the artifact index (table) and the champion's files (bucket). */
  readonly resources: StepResources;
  /**
   * Serve the arena without sign-in: no user pool, no authorizer; anyone who has the URL can
   * play, within the stage's throttle. Default: false (sign-in through Cognito). Stacks pass
   * `arenaPublicFromContext(this)`.
   */
  readonly public?: boolean;
  /**
   * Prefix of the managed-login domain, https://<prefix>.auth.<region>.amazoncognito.com: lowercase
   * letters, digits and hyphens, unique in the region across all accounts, without "aws",
   * "amazon" or "cognito". Default: "arena-" and the last 12 hex digits of the stack's id, unique
   * per deployed stack. Not allowed with `public`.
   */
  readonly domainPrefix?: string;
  /**
   * Make every user enrol an authenticator app (TOTP) at first sign-in. Default: false (TOTP is
   * offered, not required). Not allowed with `public`.
   */
  readonly requireMfa?: boolean;
  /** Requests per second across the API (burst: twice this), 1 to 1000. Default: 10. */
  readonly rateLimit?: number;
}

export class Arena extends Construct {
  /** The page's URL. */
  readonly url: string;
  readonly api: HttpApi;
  readonly function: PipelineFunction;
  readonly accessLogs: LogGroup;
  /** Absent when public. */
  readonly userPool?: UserPool;
  /** The page's app client; absent when public. */
  readonly userPoolClient?: UserPoolClient;
  /** The managed-login domain; absent when public. */
  readonly signInDomain?: UserPoolDomain;
  /** A URL that opens the page and starts sign-in at once; absent when public. */
  readonly signInUrl?: string;

  constructor(scope: Construct, id: string, props: ArenaProps) {
    super(scope, id);
    const config = validate(props);
    const { table, bucket, logRetention } = props.resources;

    // ---- 1. API ------------------------------------------------------------------------
    this.accessLogs = new LogGroup(this, 'AccessLogs', { retention: logRetention, removalPolicy: RemovalPolicy.DESTROY });
    this.api = new HttpApi(this, 'Api', {
      description: "Connect Four arena: the page and the champion's moves.",
      createDefaultStage: false,
    });
    this.api.addStage('DefaultStage', {
      stageName: '$default',
      autoDeploy: true,
      // One move is one request: a person clicking never needs more; the cap bounds what a
      // leaked token or a public URL can spend.
      throttle: { rateLimit: config.rateLimit, burstLimit: 2 * config.rateLimit },
      accessLogSettings: {
        destination: new LogGroupLogDestination(this.accessLogs),
        // Who played: the token's subject (empty on the public routes).
        format: httpAccessLogFormat({ user: '$context.authorizer.claims.sub', authorizerError: '$context.authorizer.error' }),
      },
    });
    // The $default stage serves at the root of the endpoint, which has no trailing slash.
    this.url = `${this.api.apiEndpoint}/arena`;

    // ---- 3. Sign-in (before the function, whose environment names the client) ---------------
    let authorizer: HttpJwtAuthorizer | undefined;
    if (!config.public) {
      // Id "Default", which CDK leaves out of logical ids: the pool keeps the ids it has in
      // deployed arenas (ArenaUsers..., as if created directly here), so it is not replaced.
      const signIn = new PageSignIn(this, 'Default', {
        returnUrl: this.url,
        scopes: ARENA_SCOPES,
        invitation: {
          emailSubject: 'Your Connect Four arena account',
          emailBody: `Your user name is {username} and your temporary password is {####}. Sign in at ${this.url} to play the champion.`,
        },
        // Accounts to play a game, made by an admin in a minute: a retained pool would outlive
        // the stack and keep its domain name taken.
        removalPolicy: RemovalPolicy.DESTROY,
        domainPrefix: config.domainPrefix ?? stackDomainPrefix('arena'),
        requireMfa: config.requireMfa,
      });
      authorizer = signIn.authorizer;
      this.userPool = signIn.userPool;
      this.userPoolClient = signIn.client;
      this.signInDomain = signIn.domain;
      this.signInUrl = `${this.url}?sign-in=1`;
      acknowledgeFindings(signIn.userPool, [
        ...(config.requireMfa
          ? []
          : [
              {
                id: 'AwsSolutions-COG2',
                reason:
                  'MFA is offered (TOTP) but not required by default: the accounts only play a game against a read-only model, are created by admins, and need 12-character mixed passwords; requireMfa: true turns it on.',
              },
            ]),
        {
          id: 'AwsSolutions-COG8',
          reason:
            'The Plus plan (threat protection) is billed per monthly active user; this pool holds a few admin-created accounts whose only power is playing Connect Four moves, throttled at the API stage.',
        },
      ]);
    }

    // ---- 2. Function -------------------------------------------------------------------
    const signInEnv: Record<string, string> = this.userPoolClient
      ? {
          [ARENA_ENV.signIn]: 'cognito',
          [ARENA_ENV.authDomain]: this.signInDomain!.baseUrl(),
          [ARENA_ENV.clientId]: this.userPoolClient.userPoolClientId,
        }
      : { [ARENA_ENV.signIn]: 'none' };
    this.function = new PipelineFunction(this, 'Handler', {
      entry: ENTRY,
      description: "Connect Four arena: the page and the champion's replies.",
      onnxRuntime: true,
      // The champion's first load (ORT, the model, a probe inference) runs inside a request;
      // later moves take milliseconds. More memory is more CPU for that first load.
      memorySize: 1024,
      timeout: Duration.seconds(20),
      logRetention,
      environment: {
        [ENV.table]: table.tableName,
        [ENV.bucket]: bucket.bucketName,
        [ARENA_ENV.pageUrl]: this.url,
        ...signInEnv,
      },
    });
    // Read-only, and only what getArtifactVersion reads: the champion's index items (its
    // partition, by the leading-keys condition) and its files.
    this.function.addToRolePolicy(
      new PolicyStatement({
        actions: ['dynamodb:Query', 'dynamodb:GetItem'],
        resources: [table.tableArn],
        conditions: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [artifactVersionKey(CHAMPION_ARTIFACT, 1).pk] } },
      }),
    );
    const championFiles = bucket.arnForObjects(`artifacts/${CHAMPION_ARTIFACT}/*`);
    this.function.addToRolePolicy(new PolicyStatement({ actions: ['s3:GetObject'], resources: [championFiles] }));
    table.encryptionKey?.grantDecrypt(this.function);
    bucket.encryptionKey?.grantDecrypt(this.function);
    acknowledgeFindings(this.function, [
      {
        id: iam5Resource(this.function, championFiles),
        reason: `Artifact versions are immutable prefixes artifacts/${CHAMPION_ARTIFACT}/<version>/ created by each publication; the arena reads the newest, whose number is known only at run time, and no other artifact.`,
      },
    ]);

    const integration = new HttpLambdaIntegration('Integration', this.function);
    const pageRoutes = this.api.addRoutes({ path: '/arena', methods: [HttpMethod.GET], integration });
    pageRoutes.push(...this.api.addRoutes({ path: '/', methods: [HttpMethod.GET], integration }));
    const moveRoutes = this.api.addRoutes({ path: '/arena/move', methods: [HttpMethod.POST], integration, authorizer });
    const publicPage: NagFinding = {
      id: 'AwsSolutions-APIG4',
      reason:
        'The page is a static document with no data in it; it must load before sign-in because it is what starts sign-in. Moves go through the JWT-authorized route.',
    };
    for (const route of pageRoutes) acknowledgeFindings(route, [publicPage]);
    if (config.public) {
      for (const route of moveRoutes) {
        acknowledgeFindings(route, [
          {
            id: 'AwsSolutions-APIG4',
            reason:
              'Deployed public on purpose (arenaPublic): a move only reads the champion model and returns a reply, stores nothing, and the stage throttle caps what anonymous players can spend.',
          },
        ]);
      }
    }

    // ---- Outputs -------------------------------------------------------------------------
    output(this, 'ArenaUrl', this.url, 'The arena page: play the league champion.');
    if (this.userPool && this.signInUrl) {
      output(this, 'ArenaSignInUrl', this.signInUrl, 'Opens the arena and starts sign-in (managed login, authorization code + PKCE).');
      output(this, 'ArenaUserPoolId', this.userPool.userPoolId, 'Create players with aws cognito-idp admin-create-user --user-pool-id <this>.');
    }
  }
}

/** An output under a fixed name, so the README and scripts can name it. */
function output(scope: Construct, name: string, value: string, description: string): void {
  new CfnOutput(scope, name, { value, description }).overrideLogicalId(name);
}

interface ArenaConfig {
  readonly public: boolean;
  readonly domainPrefix?: string;
  readonly requireMfa: boolean;
  readonly rateLimit: number;
}

function validate(props: ArenaProps): ArenaConfig {
  const isPublic = props.public ?? false;
  if (typeof isPublic !== 'boolean') throw new ConfigError('public', isPublic, 'must be true or false');
  if (isPublic && props.domainPrefix !== undefined) {
    throw new ConfigError('domainPrefix', props.domainPrefix, 'is for sign-in; a public arena has no user pool (drop domainPrefix or public)');
  }
  if (isPublic && props.requireMfa !== undefined) {
    throw new ConfigError('requireMfa', props.requireMfa, 'is for sign-in; a public arena has no user pool (drop requireMfa or public)');
  }
  const prefix = props.domainPrefix;
  if (prefix !== undefined && !Token.isUnresolved(prefix)) {
    if (!DOMAIN_PREFIX.test(prefix)) {
      throw new ConfigError('domainPrefix', prefix, 'must be 1 to 63 lowercase letters, digits or inner hyphens');
    }
    const reserved = RESERVED_IN_PREFIX.find((word) => prefix.includes(word));
    if (reserved) throw new ConfigError('domainPrefix', prefix, `must not contain "${reserved}" (Cognito reserves ${RESERVED_IN_PREFIX.join(', ')})`);
  }
  const rateLimit = props.rateLimit ?? 10;
  if (!Number.isInteger(rateLimit) || rateLimit < 1 || rateLimit > 1000) {
    throw new ConfigError('rateLimit', rateLimit, 'must be an integer from 1 to 1000 requests per second');
  }
  return { public: isPublic, domainPrefix: prefix, requireMfa: props.requireMfa ?? false, rateLimit };
}
