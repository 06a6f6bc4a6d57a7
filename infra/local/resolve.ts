/**
 * Resolves CloudFormation intrinsics in synthesized templates to local names, so the ASL,
 * environment variables and event patterns the runtime uses come from the template itself.
 * Each resource gets a stable local physical name (data under .local/ survives restarts).
 */
import { createHash } from 'node:crypto';

export const LOCAL_REGION = 'us-east-1';
export const LOCAL_ACCOUNT = '000000000000';
/** Where SQS queue URLs point in resolved templates, before the runtime rewrites them to its loopback API. */
export const LOCAL_SQS_URL = `https://sqs.${LOCAL_REGION}.amazonaws.com/`;
/** The emulators' credentials (s3rver knows only this key). */
export const LOCAL_KEY = 'S3RVER';

export interface CfnResource {
  Type: string;
  Properties?: Record<string, unknown>;
  Metadata?: Record<string, unknown>;
}
export interface CfnTemplate {
  Resources: Record<string, CfnResource>;
  Outputs?: Record<string, { Value: unknown; Export?: { Name: unknown } }>;
}
export interface SynthStack {
  readonly stackName: string;
  readonly template: CfnTemplate;
}

/** A resource of the synthesized app. */
export interface LocalResource {
  readonly stack: string;
  readonly logicalId: string;
  readonly resource: CfnResource;
}

function shortHash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 8);
}

/** `<stack>-<logicalId>`, cut to `max` characters with a hash suffix when too long. */
function physicalName(stack: string, logicalId: string, max: number, lower = false): string {
  let name = `${stack}-${logicalId}`;
  if (lower) name = name.toLowerCase().replace(/[^a-z0-9-]/g, '-');
  return name.length <= max ? name : `${name.slice(0, max - 9)}-${shortHash(name)}`;
}

export class TemplateResolver {
  private readonly stacks = new Map<string, CfnTemplate>();
  private readonly exports = new Map<string, { stack: string; value: unknown }>();
  /** Rewrites applied to every resolved string (the approval API's URL, for one). */
  private readonly rewrites: [string, string][] = [];

  constructor(stacks: readonly SynthStack[]) {
    for (const s of stacks) this.stacks.set(s.stackName, s.template);
    for (const s of stacks) {
      for (const output of Object.values(s.template.Outputs ?? {})) {
        if (output.Export) {
          const name = String(this.resolve(s.stackName, output.Export.Name));
          this.exports.set(name, { stack: s.stackName, value: output.Value });
        }
      }
    }
  }

  template(stack: string): CfnTemplate {
    const t = this.stacks.get(stack);
    if (!t) throw new Error(`no stack ${stack} in the synthesized app`);
    return t;
  }

  /** Every resource of a type, across stacks. */
  resourcesOfType(type: string): LocalResource[] {
    const out: LocalResource[] = [];
    for (const [stack, template] of this.stacks) {
      for (const [logicalId, resource] of Object.entries(template.Resources)) {
        if (resource.Type === type) out.push({ stack, logicalId, resource });
      }
    }
    return out;
  }

  /** Replace `from` with `to` in every string resolved from now on. */
  rewrite(from: string, to: string): void {
    this.rewrites.push([from, to]);
  }

  refOf(stack: string, logicalId: string, resource: CfnResource): string {
    const props = resource.Properties ?? {};
    const arn = (service: string, rest: string) => `arn:aws:${service}:${LOCAL_REGION}:${LOCAL_ACCOUNT}:${rest}`;
    switch (resource.Type) {
      case 'AWS::DynamoDB::Table':
      case 'AWS::DynamoDB::GlobalTable':
        return typeof props.TableName === 'string' ? props.TableName : physicalName(stack, logicalId, 255);
      case 'AWS::S3::Bucket':
        return typeof props.BucketName === 'string' ? props.BucketName : physicalName(stack, logicalId, 63, true);
      case 'AWS::Lambda::Function':
        return physicalName(stack, logicalId, 64);
      case 'AWS::StepFunctions::StateMachine':
        return arn('states', `stateMachine:${physicalName(stack, logicalId, 80)}`);
      case 'AWS::Batch::JobDefinition':
        return arn('batch', `job-definition/${physicalName(stack, logicalId, 128)}:1`);
      case 'AWS::Batch::JobQueue':
        return arn('batch', `job-queue/${physicalName(stack, logicalId, 128)}`);
      case 'AWS::SecretsManager::Secret':
        return arn('secretsmanager', `secret:${physicalName(stack, logicalId, 200)}`);
      case 'AWS::IAM::Role':
        return physicalName(stack, logicalId, 64);
      case 'AWS::ApiGatewayV2::Api':
        return `local${shortHash(`${stack}/${logicalId}`)}`;
      case 'AWS::Events::Rule':
        return physicalName(stack, logicalId, 64);
      case 'AWS::SES::EmailIdentity':
        return typeof props.EmailIdentity === 'string' ? props.EmailIdentity : physicalName(stack, logicalId, 64);
      case 'AWS::SQS::Queue':
        // A queue's Ref is its URL: the runtime rewrites this host to its loopback SQS API.
        return `${LOCAL_SQS_URL}${LOCAL_ACCOUNT}/${typeof props.QueueName === 'string' ? props.QueueName : physicalName(stack, logicalId, 80)}`;
      default:
        return physicalName(stack, logicalId, 128);
    }
  }

  attrOf(stack: string, logicalId: string, resource: CfnResource, attr: string): string | undefined {
    const ref = this.refOf(stack, logicalId, resource);
    const arn = (service: string, rest: string) => `arn:aws:${service}:${LOCAL_REGION}:${LOCAL_ACCOUNT}:${rest}`;
    switch (`${resource.Type}.${attr}`) {
      case 'AWS::Lambda::Function.Arn':
        return arn('lambda', `function:${ref}`);
      case 'AWS::DynamoDB::Table.Arn':
      case 'AWS::DynamoDB::GlobalTable.Arn':
        return arn('dynamodb', `table/${ref}`);
      case 'AWS::S3::Bucket.Arn':
        return `arn:aws:s3:::${ref}`;
      case 'AWS::S3::Bucket.DomainName':
      case 'AWS::S3::Bucket.RegionalDomainName':
        return `${ref}.s3.amazonaws.com`;
      case 'AWS::IAM::Role.Arn':
        return `arn:aws:iam::${LOCAL_ACCOUNT}:role/${ref}`;
      case 'AWS::StepFunctions::StateMachine.Arn':
        return ref;
      case 'AWS::StepFunctions::StateMachine.Name':
        return ref.split(':').pop();
      case 'AWS::Batch::JobQueue.JobQueueArn':
        return ref;
      case 'AWS::Events::Rule.Arn':
        return arn('events', `rule/${ref}`);
      case 'AWS::ApiGatewayV2::Api.ApiEndpoint':
        return `https://${ref}.execute-api.${LOCAL_REGION}.amazonaws.com`;
      case 'AWS::Logs::LogGroup.Arn':
        return arn('logs', `log-group:${ref}:*`);
      case 'AWS::SQS::Queue.Arn':
        return arn('sqs', ref.split('/').pop()!);
      case 'AWS::SQS::Queue.QueueName':
        return ref.split('/').pop();
      case 'AWS::SQS::Queue.QueueUrl':
        return ref;
      default:
        return attr === 'Arn' ? undefined : `${ref}.${attr}`;
    }
  }

  /** Resolve every intrinsic in `value`, in the context of `stack`. */
  resolve(stack: string, value: unknown): unknown {
    const out = this.resolveRaw(stack, value);
    return this.rewrites.length ? this.applyRewrites(out) : out;
  }

  private applyRewrites(value: unknown): unknown {
    if (typeof value === 'string') {
      let s = value;
      for (const [from, to] of this.rewrites) s = s.split(from).join(to);
      return s;
    }
    if (Array.isArray(value)) return value.map((v) => this.applyRewrites(v));
    if (value && typeof value === 'object') {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, this.applyRewrites(v)]));
    }
    return value;
  }

  private resolveRaw(stack: string, value: unknown): unknown {
    if (Array.isArray(value)) return value.map((v) => this.resolveRaw(stack, v)).filter((v) => v !== NO_VALUE);
    if (!value || typeof value !== 'object') return value;
    const obj = value as Record<string, unknown>;
    const keys = Object.keys(obj);
    if (keys.length === 1) {
      const [fn] = keys as [string];
      const arg = obj[fn];
      switch (fn) {
        case 'Ref':
          return this.ref(stack, String(arg));
        case 'Fn::GetAtt': {
          const [logicalId, attr] = Array.isArray(arg) ? (arg as string[]) : String(arg).split(/\.(.+)/);
          const resource = this.template(stack).Resources[logicalId!];
          if (!resource) throw new Error(`Fn::GetAtt of unknown resource ${logicalId} in ${stack}`);
          return this.attrOf(stack, logicalId!, resource, attr!) ?? `${this.refOf(stack, logicalId!, resource)}.${attr}`;
        }
        case 'Fn::Join': {
          const [sep, parts] = arg as [string, unknown[]];
          return (this.resolveRaw(stack, parts) as unknown[]).map(String).join(sep);
        }
        case 'Fn::Select': {
          const [index, list] = arg as [unknown, unknown];
          return (this.resolveRaw(stack, list) as unknown[])[Number(this.resolveRaw(stack, index))];
        }
        case 'Fn::Split': {
          const [sep, text] = arg as [string, unknown];
          return String(this.resolveRaw(stack, text)).split(sep);
        }
        case 'Fn::Sub': {
          const [template, vars] = Array.isArray(arg) ? (arg as [string, Record<string, unknown>]) : [String(arg), {}];
          return template.replace(/\$\{([^}!]+)\}/g, (_m, name: string) => {
            if (name in vars) return String(this.resolveRaw(stack, vars[name]));
            if (name.includes('.')) return String(this.resolveRaw(stack, { 'Fn::GetAtt': name }));
            return String(this.ref(stack, name));
          });
        }
        case 'Fn::ImportValue': {
          const name = String(this.resolveRaw(stack, arg));
          const exported = this.exports.get(name);
          if (!exported) throw new Error(`Fn::ImportValue ${name}: no stack exports it`);
          return this.resolveRaw(exported.stack, exported.value);
        }
        case 'Fn::Base64':
          return Buffer.from(String(this.resolveRaw(stack, arg))).toString('base64');
        default:
          break;
      }
    }
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(obj)) {
      const r = this.resolveRaw(stack, v);
      if (r !== NO_VALUE) out[k] = r;
    }
    return out;
  }

  private ref(stack: string, name: string): unknown {
    switch (name) {
      case 'AWS::Partition':
        return 'aws';
      case 'AWS::Region':
        return LOCAL_REGION;
      case 'AWS::AccountId':
        return LOCAL_ACCOUNT;
      case 'AWS::URLSuffix':
        return 'amazonaws.com';
      case 'AWS::StackName':
        return stack;
      case 'AWS::NoValue':
        return NO_VALUE;
      default: {
        const resource = this.template(stack).Resources[name];
        if (!resource) return `local-param-${name}`;
        return this.refOf(stack, name, resource);
      }
    }
  }
}

const NO_VALUE = Symbol('AWS::NoValue');
