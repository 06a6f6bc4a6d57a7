/**
 * The Cognito sign-in settings of a page, as the construct that builds its user pool passes them
 * to the page's function: a mode variable ('cognito', or a word that turns sign-in off), the
 * managed-login domain, the app client, and whatever else that page needs. The approval page
 * (shared/approval.ts) and the arena (shared/selfplay/arena.ts) read theirs through this.
 */
import { ConfigError } from './errors.ts';

/** What a page needs to sign people in through Cognito's managed login (authorization code + PKCE). */
export interface CognitoPageSignIn {
  readonly mode: 'cognito';
  /** Base URL of the managed-login domain: /oauth2/authorize, /oauth2/token and /logout live under it. */
  readonly domain: string;
  readonly clientId: string;
  /** The page sign-in returns to, registered as the client's callback and sign-out URL. */
  readonly redirectUri: string;
  readonly scopes: readonly string[];
}

/** Where one page's sign-in settings live in its function's environment. */
export interface CognitoSignInVariables<K extends string> {
  /** The variable that holds 'cognito' or `off`. */
  readonly mode: string;
  /** The mode's value for a page without sign-in ('link', 'none'). */
  readonly off: string;
  /** Base URL of the managed-login domain, https://<prefix>.auth.<region>.amazoncognito.com. */
  readonly authDomain: string;
  /** The page's app client. */
  readonly clientId: string;
  /** More variables required with sign-in, under the names the result gives their values. */
  readonly more?: Readonly<Record<K, string>>;
}

/** The settings with sign-in: the domain without a trailing slash, the client, and the `more` values. */
export type CognitoSignInSettings<K extends string> = { readonly domain: string; readonly clientId: string } & Readonly<Record<K, string>>;

/**
 * The sign-in settings from `env`, or undefined when the mode is `off`. Throws a ConfigError
 * naming the mode variable when it is neither, or the first required variable that is missing or
 * empty (domain, client, then `more` in order); each message ends with "<setBy> sets it".
 */
export function cognitoSignInFromEnv<K extends string = never>(
  env: Record<string, string | undefined>,
  variables: CognitoSignInVariables<K>,
  setBy: string,
): CognitoSignInSettings<K> | undefined {
  const mode = env[variables.mode];
  if (mode === variables.off) return undefined;
  if (mode !== 'cognito') throw new ConfigError(variables.mode, mode, `must be "cognito" or "${variables.off}"; ${setBy} sets it`);
  const need = (name: string): string => {
    const value = env[name];
    if (!value) throw new ConfigError(name, value, `must be set when ${variables.mode} is "cognito"; ${setBy} sets it`);
    return value;
  };
  const domain = need(variables.authDomain).replace(/\/+$/, '');
  const clientId = need(variables.clientId);
  const more = Object.fromEntries(Object.entries<string>(variables.more ?? {}).map(([key, name]) => [key, need(name)])) as Record<K, string>;
  return { ...more, domain, clientId };
}
