/**
 * The Arena construct: its API, function, grants and sign-in, in both modes, under cdk-nag's
 * AWS Solutions checks. Built the way the app builds it: beside the real platform stack, so the
 * grants cross stacks as they will in the league's stack; plus a stand-alone stack for the
 * constructor's validation rules.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, type Environment, Stack, type StackProps } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import type { Construct } from 'constructs';
import { z } from 'zod';
import { ARENA_ENV, CHAMPION_ARTIFACT } from '#shared/selfplay/arena.ts';
import { ConfigError } from '#shared/errors.ts';
import { ENV } from '#shared/env.ts';
import type { StepResources } from '#pipelines/steps/resources.ts';
import { Arena, ARENA_PUBLIC_CONTEXT, arenaPublicFromContext, type ArenaProps } from '#pipelines/selfplay/arena.ts';
import { buildApp } from '#infra/build-app.ts';
import type { PipelineEntry } from '#infra/registry.ts';
import { minimalScope } from '../support/stacks.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';

const STACK_ID = 'ArenaTest';

/** A stack holding only an Arena, built from the platform's resources as a pipeline stack is. */
class ArenaStack extends Stack {
  readonly arena: Arena;
  constructor(scope: Construct, id: string, props: StackProps & { resources: StepResources; arena?: Omit<ArenaProps, 'resources'> }) {
    super(scope, id, props);
    this.arena = new Arena(this, 'Arena', { public: arenaPublicFromContext(this), ...props.arena, resources: props.resources });
  }
}

function arenaEntry(arena?: Omit<ArenaProps, 'resources'>): PipelineEntry {
  return {
    name: 'arena-test',
    stackId: STACK_ID,
    description: 'arena (test)',
    config: z.object({}),
    smoke: {},
    create: (scope, id, props) => new ArenaStack(scope, id, { ...props, arena }),
  };
}

type Violation = { ruleName: string; severity: string; violatingConstructs?: { constructPath: string }[] };

/** The app (platform + the arena stack) synthesized with cdk-nag on; fails listing any finding. */
function synthWithNag(options: { env?: Environment; context?: Record<string, unknown>; arena?: Omit<ArenaProps, 'resources'> } = {}) {
  const outdir = mkdtempSync(join(tmpdir(), 'arena-nag-'));
  try {
    const { app } = buildApp({
      outdir,
      skipBundling: true,
      fastSynth: true,
      nag: true,
      env: options.env,
      context: options.context,
      pipelines: [arenaEntry(options.arena)],
    });
    let failure: Error | undefined;
    try {
      app.synth();
    } catch (error) {
      failure = error as Error;
    }
    let violations: Violation[] = [];
    try {
      const report = JSON.parse(readFileSync(join(outdir, 'validation-report.json'), 'utf8')) as { pluginReports: { violations: Violation[] }[] };
      violations = report.pluginReports.flatMap((p) => p.violations);
    } catch {
      // No report: synth failed before validation; its message says why.
    }
    const listed = violations.map((v) => `${v.severity} ${v.ruleName}: ${(v.violatingConstructs ?? []).map((c) => c.constructPath).join(', ')}`);
    if (failure) assert.fail(`synth failed: ${failure.message}\n${listed.join('\n')}`);
    // A clean run leaves no finding at all, not even a warning.
    assert.deepEqual(listed, []);
    const stack = app.node.findChild(STACK_ID) as ArenaStack;
    return { app, stack, template: Template.fromStack(stack) };
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

type Resource = { Type: string; Properties: Record<string, unknown> };

function routes(template: Template): Record<string, Resource['Properties']> {
  return Object.fromEntries(
    Object.values(template.findResources('AWS::ApiGatewayV2::Route') as Record<string, Resource>).map((r) => [String(r.Properties.RouteKey), r.Properties]),
  );
}

function functionEnvironment(template: Template): Record<string, unknown> {
  const [fn] = Object.values(template.findResources('AWS::Lambda::Function') as Record<string, Resource>);
  return (fn!.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
}

/** Every IAM action the stack's policies allow. */
function allowedActions(template: Template): string[] {
  return Object.values(template.findResources('AWS::IAM::Policy') as Record<string, Resource>).flatMap((p) =>
    (p.Properties.PolicyDocument as { Statement: { Action: string | string[] }[] }).Statement.flatMap((s) => [s.Action].flat()),
  );
}

describe('Arena (default: sign-in through Cognito)', () => {
  for (const [label, env] of [
    ['environment-agnostic', undefined],
    ['with an account and region', { account: '123456789012', region: 'eu-west-1' }],
  ] as const) {
    it(`passes cdk-nag with every finding acknowledged (${label})`, () => {
      synthWithNag({ env });
    });
  }

  const { stack, template } = synthWithNag();

  it('puts the JWT authorizer on the move route only: the page stays public so it can offer sign-in', () => {
    const byKey = routes(template);
    assert.deepEqual(Object.keys(byKey).sort(), ['GET /', 'GET /arena', 'POST /arena/move']);
    assert.equal(byKey['POST /arena/move']!.AuthorizationType, 'JWT');
    assert.ok(byKey['POST /arena/move']!.AuthorizerId, 'the move route names its authorizer');
    for (const key of ['GET /', 'GET /arena']) assert.equal(byKey[key]!.AuthorizationType ?? 'NONE', 'NONE', key);
    template.resourceCountIs('AWS::ApiGatewayV2::Authorizer', 1);
    template.hasResourceProperties('AWS::ApiGatewayV2::Authorizer', {
      AuthorizerType: 'JWT',
      IdentitySource: ['$request.header.Authorization'],
      JwtConfiguration: {
        Audience: [{ Ref: Match.stringLikeRegexp('PageClient') }],
        Issuer: { 'Fn::Join': ['', Match.arrayWith([Match.stringLikeRegexp('^https://cognito-idp\\.'), { Ref: Match.stringLikeRegexp('ArenaUsers') }])] },
      },
    });
  });

  it('creates a user pool without self sign-up and a public PKCE client calling back to the page', () => {
    template.hasResourceProperties('AWS::Cognito::UserPool', {
      AdminCreateUserConfig: Match.objectLike({ AllowAdminCreateUserOnly: true }),
      MfaConfiguration: 'OPTIONAL',
      UserPoolTier: 'ESSENTIALS',
      Policies: { PasswordPolicy: Match.objectLike({ MinimumLength: 12, RequireSymbols: true, RequireUppercase: true, RequireNumbers: true }) },
    });
    const [client] = Object.values(template.findResources('AWS::Cognito::UserPoolClient') as Record<string, Resource>);
    const props = client!.Properties;
    assert.equal(props.GenerateSecret, false);
    assert.deepEqual(props.AllowedOAuthFlows, ['code']);
    assert.equal(props.AllowedOAuthFlowsUserPoolClient, true);
    assert.deepEqual(props.AllowedOAuthScopes, ['openid', 'email', 'profile']);
    assert.deepEqual(props.SupportedIdentityProviders, ['COGNITO']);
    assert.deepEqual(stack.resolve(props.CallbackURLs), stack.resolve([stack.arena.url]));
    assert.deepEqual(stack.resolve(props.LogoutURLs), stack.resolve([stack.arena.url]));
    template.hasResourceProperties('AWS::Cognito::UserPoolDomain', { ManagedLoginVersion: 2 });
    template.hasResourceProperties('AWS::Cognito::ManagedLoginBranding', { UseCognitoProvidedValues: true });
  });

  it('tells the function how the page signs in, and where the index is', () => {
    const env = functionEnvironment(template);
    assert.equal(env[ARENA_ENV.signIn], 'cognito');
    assert.deepEqual(stack.resolve(env[ARENA_ENV.pageUrl]), stack.resolve(stack.arena.url));
    assert.deepEqual(stack.resolve(env[ARENA_ENV.clientId]), stack.resolve(stack.arena.userPoolClient!.userPoolClientId));
    assert.deepEqual(stack.resolve(env[ARENA_ENV.authDomain]), stack.resolve(stack.arena.signInDomain!.baseUrl()));
    assert.ok(env[ENV.table] && env[ENV.bucket]);
  });

  it('grants reads of the champion only: its index partition and its files, nothing written', () => {
    const actions = allowedActions(template);
    assert.deepEqual([...new Set(actions)].sort(), ['dynamodb:GetItem', 'dynamodb:Query', 's3:GetObject']);
    template.hasResourceProperties('AWS::IAM::Policy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Action: ['dynamodb:GetItem', 'dynamodb:Query'],
            Condition: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [`ARTIFACT#${CHAMPION_ARTIFACT}`] } },
          }),
          Match.objectLike({
            Action: 's3:GetObject',
            Resource: { 'Fn::Join': ['', [Match.anyValue(), `/artifacts/${CHAMPION_ARTIFACT}/*`]] },
          }),
        ]),
      },
    });
  });

  it('throttles the stage and writes JSON access logs', () => {
    template.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      StageName: '$default',
      DefaultRouteSettings: { ThrottlingRateLimit: 10, ThrottlingBurstLimit: 20 },
      AccessLogSettings: { DestinationArn: Match.anyValue(), Format: Match.stringLikeRegexp('"routeKey":"\\$context.routeKey"') },
    });
  });

  it('ships onnxruntime-node with the function, which runs on Node 22 with room for a model', () => {
    // onnxruntime-node is shipped next to the bundle (a native module esbuild cannot bundle): its
    // version is part of the function's code version, which is how the bundler hook is chosen
    // (test/constructs/asset-size.test.ts opens the built asset and loads the binary).
    const components = stack.arena.function.codeVersion.components;
    assert.equal(components['npm:onnxruntime-node'], JSON.parse(readFileSync(join(REPO_ROOT, 'node_modules/onnxruntime-node/package.json'), 'utf8')).version);
    assert.ok(components['npm:onnxruntime-common'], `shipped packages: ${Object.keys(components).filter((k) => k.startsWith('npm:'))}`);
    template.hasResourceProperties('AWS::Lambda::Function', { Runtime: 'nodejs22.x', MemorySize: 1024, Timeout: 20 });
  });

  it('outputs the page URL, the sign-in URL and the user pool id under fixed names', () => {
    const outputs = template.findOutputs('*');
    assert.deepEqual(Object.keys(outputs).sort(), ['ArenaSignInUrl', 'ArenaUrl', 'ArenaUserPoolId']);
    assert.deepEqual(stack.resolve(outputs.ArenaUrl!.Value), stack.resolve(stack.arena.url));
    assert.deepEqual(stack.resolve(outputs.ArenaSignInUrl!.Value), stack.resolve(`${stack.arena.url}?sign-in=1`));
  });

  it('requires TOTP MFA with requireMfa, and then needs no COG2 acknowledgement', () => {
    const { template: strict } = synthWithNag({ arena: { requireMfa: true } });
    strict.hasResourceProperties('AWS::Cognito::UserPool', { MfaConfiguration: 'ON', EnabledMfas: ['SOFTWARE_TOKEN_MFA'] });
  });
});

describe('Arena (public: true, from the arenaPublic context flag)', () => {
  const { stack, template } = synthWithNag({ context: { [ARENA_PUBLIC_CONTEXT]: 'true' } });

  it('passes cdk-nag, acknowledging the unauthorized move route', () => {
    const acknowledged = stack.node
      .findAll()
      .flatMap((c) => c.node.metadata.filter((m) => m.type === 'aws:cdk:acknowledged-rules').flatMap((m) => Object.keys(m.data as object)));
    assert.ok(acknowledged.some((id) => id.endsWith('AwsSolutions-APIG4')));
  });

  it('has no authorizer and no user pool', () => {
    template.resourceCountIs('AWS::ApiGatewayV2::Authorizer', 0);
    template.resourceCountIs('AWS::Cognito::UserPool', 0);
    template.resourceCountIs('AWS::Cognito::UserPoolClient', 0);
    template.resourceCountIs('AWS::Cognito::UserPoolDomain', 0);
    for (const [key, props] of Object.entries(routes(template))) assert.equal(props.AuthorizationType ?? 'NONE', 'NONE', key);
    assert.equal(stack.arena.userPool, undefined);
    assert.equal(stack.arena.signInUrl, undefined);
  });

  it('tells the function there is no sign-in and outputs only the page URL', () => {
    const env = functionEnvironment(template);
    assert.equal(env[ARENA_ENV.signIn], 'none');
    assert.equal(env[ARENA_ENV.clientId], undefined);
    assert.deepEqual(Object.keys(template.findOutputs('*')), ['ArenaUrl']);
  });
});

describe('arenaPublicFromContext', () => {
  const read = (value: unknown) => arenaPublicFromContext(new App(value === undefined ? {} : { context: { [ARENA_PUBLIC_CONTEXT]: value } }));

  it('is false when the flag is absent or false, true when true (as -c passes it, a string)', () => {
    assert.equal(read(undefined), false);
    assert.equal(read(false), false);
    assert.equal(read('false'), false);
    assert.equal(read(true), true);
    assert.equal(read('true'), true);
  });

  it('throws when the flag is anything else, naming it and the value', () => {
    assert.throws(
      () => read('yes'),
      (error: unknown) => error instanceof ConfigError && error.field === 'context arenaPublic' && /"yes"/.test(error.message),
    );
  });
});

describe('Arena validation', () => {
  /** A stand-alone stack with imported stand-ins for the platform's resources. */
  function build(props: Omit<ArenaProps, 'resources'>): Arena {
    const { stack, resources } = minimalScope();
    return new Arena(stack, 'Arena', { ...props, resources });
  }

  function throwsConfigError(props: Omit<ArenaProps, 'resources'>, field: string, value: string): void {
    assert.throws(
      () => build(props),
      (error: unknown) => error instanceof ConfigError && error.field === field && error.message.includes(value),
    );
  }

  it('uses a given domain prefix', () => {
    const arena = build({ domainPrefix: 'league-arena-1' });
    Template.fromStack(Stack.of(arena)).hasResourceProperties('AWS::Cognito::UserPoolDomain', { Domain: 'league-arena-1' });
  });

  it('throws when domainPrefix is not lowercase letters, digits and inner hyphens', () => {
    throwsConfigError({ domainPrefix: 'Arena_1' }, 'domainPrefix', '"Arena_1"');
    throwsConfigError({ domainPrefix: '-arena' }, 'domainPrefix', '"-arena"');
  });

  it('throws when domainPrefix holds a word Cognito reserves', () => {
    throwsConfigError({ domainPrefix: 'my-cognito-arena' }, 'domainPrefix', 'cognito');
  });

  it('throws when a sign-in prop is given to a public arena', () => {
    throwsConfigError({ public: true, domainPrefix: 'league-arena' }, 'domainPrefix', 'public');
    throwsConfigError({ public: true, requireMfa: true }, 'requireMfa', 'public');
  });

  it('throws when rateLimit is not an integer from 1 to 1000', () => {
    throwsConfigError({ rateLimit: 0 }, 'rateLimit', '(got 0)');
    throwsConfigError({ rateLimit: 2.5 }, 'rateLimit', '(got 2.5)');
  });
});
