/**
 * Sign-in for approvers: who may decide an approval gate, by default.
 *
 * 1. A Cognito user pool like the arena's: no self sign-up (an admin creates each approver),
 *    12-character mixed passwords, TOTP offered, account recovery by email only.
 * 2. A group (`approvers` unless told otherwise): only its members may decide. Adding a person
 *    to the pool lets them sign in; adding them to the group lets them decide.
 * 3. A public app client for the approval page (authorization code with PKCE, no secret), whose
 *    callback and sign-out URL is the page sign-in returns to (`<api>/approvals`).
 * 4. A managed-login domain with Cognito's own style.
 * 5. `authorizer()`: API Gateway's JWT authorizer for the decision route, which checks the
 *    token's signature, issuer, expiry and audience (this client) before the function runs.
 *
 * The approval API lives in the platform stack and the arena's pool in the selfplay stack, which
 * depends on the platform; so approvers get their own pool here rather than the arena's.
 */
import { Aws, Duration, Fn, RemovalPolicy, Stack } from 'aws-cdk-lib';
import { HttpJwtAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import {
  AccountRecovery,
  CfnManagedLoginBranding,
  FeaturePlan,
  ManagedLoginVersion,
  Mfa,
  OAuthScope,
  UserPool,
  type UserPoolClient,
  UserPoolClientIdentityProvider,
  type UserPoolDomain,
  type UserPoolGroup,
} from 'aws-cdk-lib/aws-cognito';
import { Construct } from 'constructs';
import { APPROVAL_SCOPES, APPROVERS_GROUP } from '#shared/approval.ts';
import { ConfigError } from '#shared/errors.ts';
import { acknowledgeFindings } from '#pipelines/steps/nag-findings.ts';

/** CDK context flag that turns sign-in off (the link-only mode): `cdk deploy -c approvalSignIn=false`. */
export const APPROVAL_SIGN_IN_CONTEXT = 'approvalSignIn';

/**
 * The `approvalSignIn` context flag as a boolean: absent = true (sign-in). Accepts true/false and,
 * as `-c approvalSignIn=false` passes them, the strings "true"/"false"; anything else throws.
 */
export function approvalSignInFromContext(scope: Construct): boolean {
  const value: unknown = scope.node.tryGetContext(APPROVAL_SIGN_IN_CONTEXT);
  if (value === undefined || value === true || value === 'true') return true;
  if (value === false || value === 'false') return false;
  throw new ConfigError(`context ${APPROVAL_SIGN_IN_CONTEXT}`, value, 'must be true or false (cdk deploy -c approvalSignIn=false turns sign-in off)');
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

export class ApproverSignIn extends Construct {
  readonly userPool: UserPool;
  readonly client: UserPoolClient;
  readonly domain: UserPoolDomain;
  readonly group: UserPoolGroup;
  /** The group's name, as it appears in the tokens' `cognito:groups`. */
  readonly groupName: string;
  /** The issuer Cognito writes into its tokens. */
  readonly issuer: string;

  constructor(scope: Construct, id: string, props: ApproverSignInProps) {
    super(scope, id);
    const groupName = props.group ?? APPROVERS_GROUP;
    if (!GROUP_NAME.test(groupName)) throw new ConfigError('group', groupName, 'must be 1 to 128 characters without whitespace');
    const stack = Stack.of(this);
    this.groupName = groupName;

    this.userPool = new UserPool(this, 'Users', {
      // Admins create approvers (aws cognito-idp admin-create-user); nobody signs up alone.
      selfSignUpEnabled: false,
      signInAliases: { username: true, email: true },
      autoVerify: { email: true },
      standardAttributes: { email: { required: true, mutable: true } },
      passwordPolicy: {
        minLength: 12,
        requireLowercase: true,
        requireUppercase: true,
        requireDigits: true,
        requireSymbols: true,
        tempPasswordValidity: Duration.days(7),
      },
      mfa: props.requireMfa ? Mfa.REQUIRED : Mfa.OPTIONAL,
      mfaSecondFactor: { otp: true, sms: false },
      accountRecovery: AccountRecovery.EMAIL_ONLY,
      // Essentials: managed login and the newer sign-in pages (see the COG8 acknowledgement).
      featurePlan: FeaturePlan.ESSENTIALS,
      userInvitation: {
        emailSubject: 'Your pipeline approver account',
        emailBody:
          'Your user name is {username} and your temporary password is {####}. Sign in from the page an approval email links to, after an administrator has added you to the approvers group.',
      },
      // Who may approve is a record worth keeping past the stack: retained like the table.
      removalPolicy: RemovalPolicy.RETAIN,
    });
    this.group = this.userPool.addGroup('Approvers', {
      groupName,
      description: 'Members may approve or reject the approval requests of the pipelines.',
    });
    this.client = this.userPool.addClient('PageClient', {
      // A page cannot keep a secret: authorization code with PKCE, as for any public client.
      generateSecret: false,
      authFlows: { userSrp: true },
      oAuth: {
        flows: { authorizationCodeGrant: true },
        scopes: APPROVAL_SCOPES.map((s) => OAuthScope.custom(s)),
        callbackUrls: [props.returnUrl],
        logoutUrls: [props.returnUrl],
      },
      supportedIdentityProviders: [UserPoolClientIdentityProvider.COGNITO],
      preventUserExistenceErrors: true,
      // A decision takes minutes: a short token bounds what a copied one could do.
      accessTokenValidity: Duration.hours(1),
      idTokenValidity: Duration.hours(1),
      refreshTokenValidity: Duration.days(1),
      enableTokenRevocation: true,
    });
    this.domain = this.userPool.addDomain('SignIn', {
      cognitoDomain: { domainPrefix: defaultDomainPrefix() },
      managedLoginVersion: ManagedLoginVersion.NEWER_MANAGED_LOGIN,
    });
    // The newer managed login shows a client's pages only once it has a style; Cognito's own.
    new CfnManagedLoginBranding(this, 'SignInBranding', {
      userPoolId: this.userPool.userPoolId,
      clientId: this.client.userPoolClientId,
      useCognitoProvidedValues: true,
    });
    this.issuer = `https://cognito-idp.${stack.region}.${stack.urlSuffix}/${this.userPool.userPoolId}`;

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

  /** The JWT authorizer for routes that need a signed-in person: the token must come from this client. */
  authorizer(): HttpJwtAuthorizer {
    return new HttpJwtAuthorizer('ApproverAuthorizer', this.issuer, { jwtAudience: [this.client.userPoolClientId] });
  }
}

/**
 * "approvals-" and the last group of the stack id's UUID (12 hex digits): unique per deployed stack,
 * so two accounts deploying this app never ask for the same global domain name.
 */
function defaultDomainPrefix(): string {
  return `approvals-${Fn.select(4, Fn.split('-', Fn.select(2, Fn.split('/', Aws.STACK_ID))))}`;
}
