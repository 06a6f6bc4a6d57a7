/**
 * Sign-in for approvers: who may decide an approval gate, by default.
 *
 * 1. A PageSignIn (pipelines/steps/page-sign-in.ts) like the arena's: a Cognito user pool with no
 *    self sign-up (an admin creates each approver), 12-character mixed passwords, TOTP offered,
 *    account recovery by email only; retained when the stack is deleted.
 * 2. A group (`approvers` unless told otherwise): only its members may decide. Adding a person
 *    to the pool lets them sign in; adding them to the group lets them decide.
 * 3. A public app client for the approval page (authorization code with PKCE, no secret), whose
 *    callback and sign-out URL is the page sign-in returns to (`<api>/approvals`).
 * 4. A managed-login domain with Cognito's own style, `approvals-<stack id suffix>`.
 * 5. `authorizer`: API Gateway's JWT authorizer for the decision route, which checks the
 *    token's signature, issuer, expiry and audience (this client) before the function runs.
 *
 * The approval API lives in the platform stack and the arena's pool in the selfplay stack, which
 * depends on the platform; so approvers get their own pool here rather than the arena's.
 */
import { RemovalPolicy } from 'aws-cdk-lib';
import type { UserPoolGroup } from 'aws-cdk-lib/aws-cognito';
import type { Construct } from 'constructs';
import { APPROVAL_SCOPES, APPROVERS_GROUP } from '#shared/approval.ts';
import { ConfigError } from '#shared/errors.ts';
import { contextFlag } from '#pipelines/steps/context-flag.ts';
import { acknowledgeFindings } from '#pipelines/steps/nag-findings.ts';
import { PageSignIn, stackDomainPrefix } from '#pipelines/steps/page-sign-in.ts';

/** CDK context flag that turns sign-in off (the link-only mode): `cdk deploy -c approvalSignIn=false`. */
export const APPROVAL_SIGN_IN_CONTEXT = 'approvalSignIn';

/**
 * The `approvalSignIn` context flag as a boolean: absent = true (sign-in). Accepts true/false and,
 * as `-c approvalSignIn=false` passes them, the strings "true"/"false"; anything else throws.
 */
export function approvalSignInFromContext(scope: Construct): boolean {
  return contextFlag(scope, APPROVAL_SIGN_IN_CONTEXT, true, 'cdk deploy -c approvalSignIn=false turns sign-in off');
}

/** A Cognito group name: 1 to 128 characters without whitespace (Cognito's rule). */
const GROUP_NAME = /^[\p{L}\p{M}\p{S}\p{N}\p{P}]{1,128}$/u;

export interface ApproverSignInProps {
  /** `<approval api>/approvals`: the page sign-in returns to, registered as callback and sign-out URL. */
  readonly returnUrl: string;
  /** The group whose members may decide. Default: `approvers`. */
  readonly group?: string;
  /** Make every approver enrol an authenticator app (TOTP) at first sign-in. Default: false (offered). */
  readonly requireMfa?: boolean;
}

export class ApproverSignIn extends PageSignIn {
  readonly group: UserPoolGroup;
  /** The group's name, as it appears in the tokens' `cognito:groups`. */
  readonly groupName: string;

  constructor(scope: Construct, id: string, props: ApproverSignInProps) {
    const groupName = props.group ?? APPROVERS_GROUP;
    if (!GROUP_NAME.test(groupName)) throw new ConfigError('group', groupName, 'must be 1 to 128 characters without whitespace');
    super(scope, id, {
      returnUrl: props.returnUrl,
      scopes: APPROVAL_SCOPES,
      invitation: {
        emailSubject: 'Your pipeline approver account',
        emailBody:
          'Your user name is {username} and your temporary password is {####}. Sign in from the page an approval email links to, after an administrator has added you to the approvers group.',
      },
      // Who may approve is a record worth keeping past the stack: retained like the table.
      removalPolicy: RemovalPolicy.RETAIN,
      domainPrefix: stackDomainPrefix('approvals'),
      requireMfa: props.requireMfa,
      // The name the approval API's authorizer has had since it was first deployed.
      authorizerId: 'ApproverAuthorizer',
    });
    this.groupName = groupName;
    this.group = this.userPool.addGroup('Approvers', {
      groupName,
      description: 'Members may approve or reject the approval requests of the pipelines.',
    });

    acknowledgeFindings(this.userPool, [
      ...(props.requireMfa
        ? []
        : [
            {
              id: 'AwsSolutions-COG2',
              reason:
                'MFA is offered (TOTP) but not required by default: approver accounts are created by admins, need 12-character mixed passwords and can only decide pending approvals of this account; requireMfa: true turns it on.',
            },
          ]),
      {
        id: 'AwsSolutions-COG8',
        reason:
          'The Plus plan (threat protection) is billed per monthly active user; this pool holds a few admin-created approver accounts, and each decision is recorded with the identity of the approver.',
      },
    ]);
  }
}
