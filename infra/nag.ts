/**
 * cdk-nag wiring (v3 API). `applyNag` registers the AWS Solutions rule pack as a policy
 * validation plugin: `app.synth()` then writes `validation-report.json` into the cloud
 * assembly and fails with "Validation failed" while any error-level finding is
 * unacknowledged. Stacks acknowledge the findings they accept with `acknowledge`, which
 * refuses an acknowledgement without a real reason.
 */
import { Validations, type App } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { ConfigError } from '#shared/errors.ts';
import { acknowledgeFindings, MIN_REASON_LENGTH, type NagFinding } from '#pipelines/steps/nag-findings.ts';

/** A finding accepted on purpose: the rule id (optionally `Rule[Finding]`) and why. */
export type NagAcknowledgement = NagFinding;
export { MIN_REASON_LENGTH };

/** Run the AWS Solutions checks over every stack of the app at synth. */
export function applyNag(app: App): void {
  Validations.of(app).addPlugins(
    // verbose: the report carries each rule's explanation, not only its title.
    // writeSuppressionsToCloudFormation: every acknowledged rule is also written into the
    // resource's template Metadata, so a reviewer of the template sees what was accepted.
    new AwsSolutionsChecks(app, { verbose: true, writeSuppressionsToCloudFormation: true }),
  );
}

/**
 * Acknowledge findings on a construct and everything under it. Each reason must explain
 * why the finding is acceptable; a missing or short one throws ConfigError.
 */
export function acknowledge(scope: IConstruct, findings: readonly NagAcknowledgement[]): void {
  for (const finding of findings) {
    if (!/^[A-Za-z0-9]+-[A-Za-z0-9]+(\[.+\])?$/.test(finding.id)) {
      throw new ConfigError('acknowledge.id', finding.id, 'must be a rule id such as AwsSolutions-IAM5 or AwsSolutions-IAM5[Resource::*]');
    }
  }
  acknowledgeFindings(scope, findings);
}
