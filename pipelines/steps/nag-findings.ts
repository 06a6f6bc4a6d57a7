/**
 * cdk-nag acknowledgements of the step constructs. infra/nag.ts runs the AWS Solutions checks
 * over the whole app at synth; each construct that causes a finding acknowledges it here,
 * with the fact that makes it acceptable. Dependencies point from infra to pipelines, so this
 * goes through CDK's Validations API rather than infra/nag.ts, with the same rule: a reason of
 * at least 20 characters (test/constructs/app-nag.test.ts reads every one back).
 *
 * cdk-nag v3 matches an acknowledgement by the exact id of one finding, such as
 * `AwsSolutions-IAM5[Resource::<Prepare75E8D311.Arn>:*]`, with no prefix or pattern matching.
 * For a resource given as a token, `iam5Resource` computes that text the way the rule does.
 */
import { Reference, Stack, Tokenization, Validations, type IResolvable } from 'aws-cdk-lib';
import type { IBucket } from 'aws-cdk-lib/aws-s3';
import type { IConstruct } from 'constructs';
import { ConfigError } from '#shared/errors.ts';

/** A finding accepted on purpose: its rule id (with `[finding]` where the rule has them) and why. */
export interface NagFinding {
  readonly id: string;
  readonly reason: string;
}

/** Shortest reason accepted: long enough to say why, not just "not needed". */
export const MIN_REASON_LENGTH = 20;

/** Acknowledges findings on `scope` and everything under it; an id already acknowledged there is skipped. */
export function acknowledgeFindings(scope: IConstruct, findings: readonly NagFinding[]): void {
  for (const finding of findings) {
    if (finding.reason.trim().length < MIN_REASON_LENGTH) {
      throw new ConfigError(
        `acknowledge.reason (${finding.id} on ${scope.node.path})`,
        finding.reason,
        `must explain the decision in at least ${MIN_REASON_LENGTH} characters`,
      );
    }
    const known = scope.node.metadata.some(
      (entry) =>
        entry.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY &&
        Object.keys(entry.data as Record<string, string>).some((key) => key.replace(/^annotation::/i, '') === finding.id),
    );
    if (!known) Validations.of(scope).acknowledge({ id: finding.id, reason: finding.reason });
  }
}

/**
 * The id of the IAM5 (wildcard permission) finding for `resource` in a policy of `consumer`'s
 * stack. The rule flattens the resolved resource: Ref as `<Id>`, Fn::GetAtt as `<Id.Attr>`,
 * Fn::Join joined, Fn::ImportValue as the export's name. A reference to another stack's
 * resource becomes an import when CDK prepares the app; `Stack.exportValue` gives now the
 * export name that the automatic reference will use (documented as the same name), so the
 * text is known at construction. Only references at the top level of `resource` are mapped
 * (an ARN built by string concatenation, as every grant here is).
 */
export function iam5Resource(consumer: IConstruct, resource: string): string {
  const stack = Stack.of(consumer);
  const local = Tokenization.reverseString(resource)
    .mapTokens({
      mapToken: (token: IResolvable) => (Reference.isReference(token) && Stack.of(token.target) !== stack ? Stack.of(token.target).exportValue(token) : token),
    })
    .join({ join: (left: unknown, right: unknown) => `${String(left)}${String(right)}` });
  return `AwsSolutions-IAM5[Resource::${flattenCfnReference(stack.resolve(local))}]`;
}

/** What cdk-nag's IAM rules write for a resolved CloudFormation value (their flattenCfnReference). */
function flattenCfnReference(node: unknown): string {
  if (node === undefined) return '';
  if (typeof node === 'string') return node.replace(/\$\{/g, '<').replace(/\}/g, '>');
  const value = node as Record<string, unknown>;
  if (value['Fn::Join']) {
    const [delimiter, items] = value['Fn::Join'] as [string, unknown[]];
    return items.map(flattenCfnReference).join(delimiter);
  }
  if (value['Fn::Sub']) return flattenCfnReference(value['Fn::Sub']);
  if (value['Fn::GetAtt']) {
    const [resource, attribute] = value['Fn::GetAtt'] as [unknown, unknown];
    return `<${flattenCfnReference(resource)}.${flattenCfnReference(attribute)}>`;
  }
  if (value['Fn::ImportValue']) return flattenCfnReference(value['Fn::ImportValue']);
  if (value['Ref']) return `<${flattenCfnReference(value['Ref'])}>`;
  return JSON.stringify(node);
}

/** AWSLambdaBasicExecutionRole, as IAM4 names it. */
export const LAMBDA_BASIC_EXECUTION_FINDING = 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]';

/** The action groups CDK's `grantRead`/`grantWrite`/`grantPut`/`grantDelete` put on an S3 policy. */
const S3_GRANT_ACTION_GROUPS = {
  read: ['s3:GetObject*', 's3:GetBucket*', 's3:List*'],
  put: ['s3:Abort*'],
  delete: ['s3:DeleteObject*'],
} as const;

/**
 * Findings of an S3 grant of CDK's (`grantReadWrite` = read + put + delete, `grantPut` = put) on
 * `objects` (an `arnForObjects` pattern) of `bucket`. `keysReason` says why the grantee needs
 * every key the pattern covers.
 */
export function s3GrantFindings(
  grantee: IConstruct,
  bucket: IBucket,
  groups: readonly (keyof typeof S3_GRANT_ACTION_GROUPS)[],
  objects: string,
  keysReason: string,
): NagFinding[] {
  const actions = groups.flatMap((group) => S3_GRANT_ACTION_GROUPS[group]);
  return [
    ...actions.map((action) => ({
      id: `AwsSolutions-IAM5[Action::${action}]`,
      reason: `${action} is one of the action groups of CDK's S3 grants: the variants of one object or bucket operation (versions, tags, ACL reads, multipart parts), on this bucket only.`,
    })),
    { id: iam5Resource(grantee, bucket.arnForObjects(objects)), reason: keysReason },
  ];
}

/**
 * Findings on a state machine's role, caused by its tasks' grants. The task's construct is
 * not an ancestor of the role (acknowledgements apply to a construct and what is under it),
 * and the step that builds it does not know the state machine, so it records them here and
 * PipelineStateMachine acknowledges them on itself. Acknowledging them on the stack instead
 * would also silence the same text on every other role of the stack.
 */
const stateMachineFindings = new WeakMap<Stack, Map<string, string>>();

export function acknowledgeOnStateMachine(scope: IConstruct, findings: readonly NagFinding[]): void {
  const stack = Stack.of(scope);
  const pending = stateMachineFindings.get(stack) ?? new Map<string, string>();
  for (const finding of findings) if (!pending.has(finding.id)) pending.set(finding.id, finding.reason);
  stateMachineFindings.set(stack, pending);
}

/** Acknowledges on `machine` what the steps of its stack recorded with `acknowledgeOnStateMachine`. */
export function applyStateMachineFindings(machine: IConstruct): void {
  const pending = stateMachineFindings.get(Stack.of(machine)) ?? new Map<string, string>();
  acknowledgeFindings(
    machine,
    [...pending].map(([id, reason]) => ({ id, reason })),
  );
}

/** The finding a LambdaInvoke task gives its state machine: CDK grants the function and `<arn>:*`. */
export function invokeGrantFinding(scope: IConstruct, functionArn: string): NagFinding {
  return {
    id: iam5Resource(scope, `${functionArn}:*`),
    reason: `CDK's LambdaInvoke grants lambda:InvokeFunction on the function's ARN and on "<arn>:*", its versions and aliases; the wildcard covers qualifiers of this one function, no other.`,
  };
}
