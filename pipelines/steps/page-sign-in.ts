/**
 * Cognito sign-in for one web page served by an HTTP API: the approval page (infra/
 * approver-sign-in.ts) and the arena (pipelines/selfplay/arena.ts).
 *
 * 1. A user pool with no self sign-up (an admin creates each account), 12-character mixed
 *    passwords, TOTP offered or required, account recovery by email only, the Essentials plan.
 * 2. A public app client for the page (authorization code with PKCE, no secret), whose only
 *    callback and sign-out URL is the page, with short-lived tokens that can be revoked.
 * 3. A managed-login domain (newer managed login) with Cognito's own style.
 * 4. `authorizer`: API Gateway's JWT authorizer for the routes that need a signed-in person.
 *
 * The caller keeps what is its own: the invitation, the removal policy, the domain prefix, any
 * group, and the cdk-nag acknowledgements on `userPool` (COG2 unless MFA is required, COG8),
 * whose reasons depend on what its accounts can do.
 *
 * Logical ids: the resources are named Users, PageClient, SignIn and SignInBranding under this
 * construct. A construct that held them directly gives this one the id "Default", which CDK
 * leaves out of logical ids, so its deployed pool is kept rather than replaced.
 */
import { Aws, Duration, Fn, type RemovalPolicy, Stack } from 'aws-cdk-lib';
import { HttpJwtAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import {
  AccountRecovery,
  CfnManagedLoginBranding,
  FeaturePlan,
  ManagedLoginVersion,
  Mfa,
  OAuthScope,
  UserPool,
  type UserInvitationConfig,
  type UserPoolClient,
  UserPoolClientIdentityProvider,
  type UserPoolDomain,
} from 'aws-cdk-lib/aws-cognito';
import { Construct } from 'constructs';

export interface PageSignInProps {
  /** The page sign-in returns to: registered as the client's callback and sign-out URL. */
  readonly returnUrl: string;
  /** The OAuth scopes the page asks for ('openid', 'email', ...). */
  readonly scopes: readonly string[];
  /** The email an admin-created user receives: must contain {username} and {####}. */
  readonly invitation: UserInvitationConfig;
  /** What deleting the stack does to the pool and its accounts. */
  readonly removalPolicy: RemovalPolicy;
  /**
   * Prefix of the managed-login domain, https://<prefix>.auth.<region>.amazoncognito.com: unique
   * in the region across all accounts (`stackDomainPrefix` gives one).
   */
  readonly domainPrefix: string;
  /** Make every user enrol an authenticator app (TOTP) at first sign-in. Default: false (offered). */
  readonly requireMfa?: boolean;
  /**
   * Construct id and name of the authorizer, created in the HTTP API it is first attached to.
   * Default: "Authorizer".
   */
  readonly authorizerId?: string;
}

export class PageSignIn extends Construct {
  readonly userPool: UserPool;
  /** The page's app client. */
  readonly client: UserPoolClient;
  /** The managed-login domain. */
  readonly domain: UserPoolDomain;
  /** The issuer Cognito writes into its tokens. */
  readonly issuer: string;
  /**
   * Checks the token's signature (keys from the issuer's JWKS), issuer, expiry and audience (aud,
   * or client_id for access tokens: this client) before the function runs. One HTTP API only:
   * the authorizer resource is created in the API of the first route it is attached to.
   */
  readonly authorizer: HttpJwtAuthorizer;

  constructor(scope: Construct, id: string, props: PageSignInProps) {
    super(scope, id);
    const stack = Stack.of(this);

    this.userPool = new UserPool(this, 'Users', {
      // Admins create accounts (aws cognito-idp admin-create-user); nobody signs up alone.
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
      // Essentials: managed login and the newer sign-in pages; Plus adds threat protection,
      // billed per monthly active user (see the callers' COG8 acknowledgements).
      featurePlan: FeaturePlan.ESSENTIALS,
      userInvitation: props.invitation,
      removalPolicy: props.removalPolicy,
    });
    this.client = this.userPool.addClient('PageClient', {
      // A page cannot keep a secret: authorization code with PKCE, as for any public client.
      generateSecret: false,
      authFlows: { userSrp: true },
      oAuth: {
        flows: { authorizationCodeGrant: true },
        scopes: props.scopes.map((scope) => OAuthScope.custom(scope)),
        callbackUrls: [props.returnUrl],
        logoutUrls: [props.returnUrl],
      },
      supportedIdentityProviders: [UserPoolClientIdentityProvider.COGNITO],
      preventUserExistenceErrors: true,
      // A decision or a game takes minutes: a short token bounds what a copied one could do.
      accessTokenValidity: Duration.hours(1),
      idTokenValidity: Duration.hours(1),
      refreshTokenValidity: Duration.days(1),
      enableTokenRevocation: true,
    });
    this.domain = this.userPool.addDomain('SignIn', {
      cognitoDomain: { domainPrefix: props.domainPrefix },
      managedLoginVersion: ManagedLoginVersion.NEWER_MANAGED_LOGIN,
    });
    // The newer managed login shows a client's pages only once it has a style; Cognito's own.
    new CfnManagedLoginBranding(this, 'SignInBranding', {
      userPoolId: this.userPool.userPoolId,
      clientId: this.client.userPoolClientId,
      useCognitoProvidedValues: true,
    });
    this.issuer = `https://cognito-idp.${stack.region}.${stack.urlSuffix}/${this.userPool.userPoolId}`;
    this.authorizer = new HttpJwtAuthorizer(props.authorizerId ?? 'Authorizer', this.issuer, { jwtAudience: [this.client.userPoolClientId] });
  }
}

/**
 * `<start>-` and the last group of the stack id's UUID (12 hex digits): unique per deployed stack,
 * so two accounts deploying this app never ask for the same global domain name.
 */
export function stackDomainPrefix(start: string): string {
  return `${start}-${Fn.select(4, Fn.split('-', Fn.select(2, Fn.split('/', Aws.STACK_ID))))}`;
}
