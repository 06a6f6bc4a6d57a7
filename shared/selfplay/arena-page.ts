/**
 * The arena page: one HTML document with its style and script inline, no framework and no
 * external URL, so it works offline and locally exactly as deployed.
 *
 * The script holds the game (the server is stateless, shared/selfplay/arena.ts) and signs in with the
 * authorization-code flow and PKCE against the Cognito domain (a public client: no secret). The
 * embedded runtime serves the same OAuth endpoints on loopback (infra/local/http-api.ts), so the
 * same code path runs in tests. Tokens stay in sessionStorage: one tab, gone when it closes.
 *
 * The settings travel as a JSON data block, which the Content-Security-Policy does not treat as
 * script; the script and the stylesheet are allowed by their hashes and nothing else runs.
 */
import { createHash } from 'node:crypto';
import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import type { ArenaSignIn } from './arena.ts';

/** Where the page posts moves: an absolute path, since the page may be opened as /arena or /arena/. */
export const MOVE_PATH = '/arena/move';

const STYLE = [
  'body{font-family:system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1b1f24}',
  'main{max-width:34rem;margin:1.5rem auto;padding:1.25rem 1.5rem;background:#fff;border:1px solid #d8dde3;border-radius:8px}',
  'h1{font-size:1.35rem;margin:0 0 .75rem}',
  '.bar{display:flex;gap:.5rem;align-items:center;flex-wrap:wrap;margin:.5rem 0}',
  'button{font-size:.95rem;padding:.4rem .9rem;border-radius:6px;border:1px solid #888;background:#fff;cursor:pointer}',
  'button:disabled{cursor:default;opacity:.45}',
  '#drops,#board{display:grid;grid-template-columns:repeat(7,3.2rem);gap:.3rem;justify-content:center}',
  '#drops button{padding:.2rem 0}',
  '#board{background:#1d4ed8;padding:.4rem;border-radius:8px;width:max-content;margin:.3rem auto}',
  '.cell{width:3.2rem;height:3.2rem;border-radius:50%;background:#fff}',
  '.cell.first{background:#d62828}.cell.second{background:#f2c14e}',
  '.cell.last{box-shadow:inset 0 0 0 4px #1b1f24}',
  '#status{font-weight:600;min-height:1.4rem}',
  '#error{color:#b42318;min-height:1.2rem}',
  '.muted{color:#5b6470;font-size:.9rem}',
  '[hidden]{display:none!important}',
].join('');

// Written without backticks or "${" so it can sit in this template literal as it is.
const SCRIPT = String.raw`(() => {
  'use strict';
  const config = JSON.parse(document.getElementById('arena-config').textContent);
  const signIn = config.signIn;
  const ROWS = 6, COLS = 7;
  const TOKEN_KEY = 'arena.session', PKCE_KEY = 'arena.pkce';
  const $ = (id) => document.getElementById(id);
  let game = null;
  let busy = false;
  let last = -1;

  const base64url = (bytes) => btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  const randomString = () => base64url(crypto.getRandomValues(new Uint8Array(32)));
  const emptyBoard = () => Array.from({ length: ROWS }, () => new Array(COLS).fill(0));

  function session() {
    try {
      const saved = JSON.parse(sessionStorage.getItem(TOKEN_KEY) || 'null');
      return saved && saved.expiresAt > Date.now() ? saved : null;
    } catch { return null; }
  }

  /** The name in the ID token, for display only: the server checks the access token. */
  function nameOf(saved) {
    try {
      const part = saved.idToken.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
      const claims = JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(part), (c) => c.charCodeAt(0))));
      return claims['cognito:username'] || claims.email || claims.sub || 'signed in';
    } catch { return 'signed in'; }
  }

  async function startSignIn() {
    const verifier = randomString();
    const state = randomString();
    const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
    sessionStorage.setItem(PKCE_KEY, JSON.stringify({ verifier, state }));
    const query = new URLSearchParams({
      response_type: 'code', client_id: signIn.clientId, redirect_uri: signIn.redirectUri,
      scope: signIn.scopes.join(' '), state, code_challenge: base64url(new Uint8Array(digest)), code_challenge_method: 'S256',
    });
    location.assign(signIn.domain + '/oauth2/authorize?' + query);
  }

  /** Back from the sign-in page with ?code&state (or ?error): exchange the code for tokens. */
  async function finishSignIn(params) {
    const saved = JSON.parse(sessionStorage.getItem(PKCE_KEY) || 'null');
    sessionStorage.removeItem(PKCE_KEY);
    history.replaceState(null, '', location.pathname);
    if (params.has('error')) throw new Error('Sign-in failed: ' + (params.get('error_description') || params.get('error')));
    if (!saved || saved.state !== params.get('state')) throw new Error('This sign-in response was not started from this tab; sign in again.');
    const response = await fetch(signIn.domain + '/oauth2/token', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code', client_id: signIn.clientId, code: params.get('code'),
        redirect_uri: signIn.redirectUri, code_verifier: saved.verifier,
      }),
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok || !body.access_token) throw new Error('Sign-in failed: ' + (body.error_description || body.error || 'HTTP ' + response.status));
    // A minute early, so a token never expires between this check and the request.
    const expiresAt = Date.now() + (Number(body.expires_in || 3600) - 60) * 1000;
    sessionStorage.setItem(TOKEN_KEY, JSON.stringify({ accessToken: body.access_token, idToken: body.id_token || '', expiresAt }));
  }

  function signOut() {
    sessionStorage.removeItem(TOKEN_KEY);
    game = null;
    const query = new URLSearchParams({ client_id: signIn.clientId, logout_uri: signIn.redirectUri });
    location.assign(signIn.domain + '/logout?' + query);
  }

  function showError(message) { $('error').textContent = message || ''; }

  async function post(moves) {
    const headers = { 'content-type': 'application/json' };
    const saved = session();
    if (saved) headers.authorization = 'Bearer ' + saved.accessToken;
    const response = await fetch(config.movePath, { method: 'POST', headers, body: JSON.stringify({ moves, human: game.human }) });
    const body = await response.json().catch(() => ({}));
    if (response.status === 401 && signIn.mode === 'cognito') {
      sessionStorage.removeItem(TOKEN_KEY);
      throw new Error('Your session has ended: sign in again.');
    }
    if (!response.ok) throw new Error(body.message || 'The server answered HTTP ' + response.status);
    return body;
  }

  async function send(moves, previous) {
    busy = true;
    showError('');
    render();
    try {
      const state = await post(moves);
      game = state;
      last = state.reply === null ? moves[moves.length - 1] ?? -1 : state.reply;
      $('champion').textContent = 'Champion: ' + state.champion.artifact + ' version ' + state.champion.version;
    } catch (error) {
      // Back to the state before the request (no game at all when it was starting one).
      game = previous;
      showError(error.message);
    } finally {
      busy = false;
      render();
    }
  }

  function newGame(human) {
    game = { human, moves: [], board: emptyBoard(), status: 'playing', toMove: human === 'first' ? 'human' : 'champion', legalMoves: [0, 1, 2, 3, 4, 5, 6] };
    last = -1;
    // Sent even when the person moves first: it loads the champion (and says if there is none).
    send([], null);
  }

  function drop(col) {
    if (busy || !game || game.toMove !== 'human' || !game.legalMoves.includes(col)) return;
    const previous = game;
    // Shown at once; the server's answer replaces it (or the error puts the old state back).
    const board = game.board.map((row) => row.slice());
    const row = board.findIndex((cells) => cells[col] === 0);
    board[row][col] = game.moves.length % 2 === 0 ? 1 : -1;
    game = { ...game, board, moves: game.moves.concat(col), toMove: 'champion' };
    last = col;
    send(game.moves, previous);
  }

  const STATUS_TEXT = { won: 'You won!', lost: 'The champion won.', draw: 'Draw: the board is full.' };

  function render() {
    const saved = session();
    const needsSignIn = signIn.mode === 'cognito' && !saved;
    $('signed-out').hidden = !needsSignIn;
    $('game').hidden = needsSignIn;
    $('who').textContent = signIn.mode === 'cognito' ? (saved ? 'Signed in as ' + nameOf(saved) : '') : 'Open arena: no sign-in';
    $('sign-out').hidden = !(signIn.mode === 'cognito' && saved);
    $('new-first').disabled = busy;
    $('new-second').disabled = busy;
    const board = game ? game.board : emptyBoard();
    for (let r = 0; r < ROWS; r++) {
      for (let c = 0; c < COLS; c++) {
        const cell = $('cell-' + r + '-' + c);
        cell.className = 'cell' + (board[r][c] === 1 ? ' first' : board[r][c] === -1 ? ' second' : '');
        if (last === c && board[r][c] !== 0 && (r === ROWS - 1 || board[r + 1][c] === 0)) cell.classList.add('last');
      }
    }
    for (let c = 0; c < COLS; c++) {
      $('drop-' + c).disabled = busy || !game || game.toMove !== 'human' || !game.legalMoves.includes(c);
    }
    const status = $('status');
    status.dataset.status = game ? game.status : 'idle';
    if (!game) status.textContent = 'Choose who moves first to start a game.';
    else if (game.status !== 'playing') status.textContent = STATUS_TEXT[game.status];
    else if (busy || game.toMove === 'champion') status.textContent = 'The champion is thinking...';
    else status.textContent = 'Your move: you play ' + (game.human === 'first' ? 'red' : 'yellow') + '.';
    $('moves').dataset.moves = JSON.stringify(game ? game.moves : []);
    $('moves').textContent = game && game.moves.length ? 'Moves: ' + game.moves.join(' ') : '';
  }

  for (let c = 0; c < COLS; c++) $('drop-' + c).addEventListener('click', () => drop(c));
  $('new-first').addEventListener('click', () => newGame('first'));
  $('new-second').addEventListener('click', () => newGame('second'));
  $('sign-in').addEventListener('click', () => startSignIn().catch((error) => showError(error.message)));
  $('sign-out').addEventListener('click', signOut);

  (async () => {
    const params = new URLSearchParams(location.search);
    try {
      if (signIn.mode === 'cognito' && (params.has('code') || params.has('error'))) await finishSignIn(params);
      else if (signIn.mode === 'cognito' && params.has('sign-in') && !session()) return await startSignIn();
    } catch (error) {
      showError(error.message);
    }
    render();
    document.body.dataset.ready = 'true';
  })();
})();`;

const hash = (text: string) => createHash('sha256').update(text).digest('base64');

/** The page's settings: how to sign in and where to post moves. */
export interface ArenaPageConfig {
  readonly signIn: ArenaSignIn;
  readonly movePath: string;
}

/** A JSON data block's text: `<` escaped, so no value can close the element or open a comment. */
function jsonForHtml(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

function contentSecurityPolicy(signIn: ArenaSignIn): string {
  // The token request goes to the Cognito domain, another origin on AWS (the same one locally).
  const connect = signIn.mode === 'cognito' ? `'self' ${new URL(signIn.domain).origin}` : "'self'";
  return [
    "default-src 'none'",
    `script-src 'sha256-${hash(SCRIPT)}'`,
    `style-src 'sha256-${hash(STYLE)}'`,
    `connect-src ${connect}`,
    "form-action 'none'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
}

/** The page as an HTTP response; built once per container, since nothing in it varies per request. */
export function renderArenaPage(config: ArenaPageConfig): APIGatewayProxyStructuredResultV2 {
  const drops = Array.from({ length: 7 }, (_, c) => `<button id="drop-${c}" aria-label="Drop in column ${c + 1}" disabled>&#9660;</button>`).join('');
  // Top row first on screen; ids use the board's own rows (row 0 = the bottom).
  const cells: string[] = [];
  for (let r = 5; r >= 0; r--) for (let c = 0; c < 7; c++) cells.push(`<div class="cell" id="cell-${r}-${c}"></div>`);
  const html = [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<meta name="robots" content="noindex, nofollow">',
    '<title>Connect Four arena</title>',
    `<style>${STYLE}</style>`,
    `<script type="application/json" id="arena-config">${jsonForHtml(config)}</script>`,
    '</head><body><main>',
    '<h1>Connect Four: play the champion</h1>',
    '<div class="bar"><span id="who" class="muted"></span><button id="sign-out" hidden>Sign out</button></div>',
    '<section id="signed-out" hidden><p>Sign in to play the league\'s champion.</p><button id="sign-in">Sign in</button></section>',
    '<section id="game">',
    '<div class="bar"><button id="new-first">New game: you move first</button><button id="new-second">New game: champion moves first</button></div>',
    '<p id="status" role="status" data-status="idle"></p>',
    `<div id="drops">${drops}</div>`,
    `<div id="board" role="grid" aria-label="Board">${cells.join('')}</div>`,
    '<p id="moves" class="muted" data-moves="[]"></p>',
    '<p id="champion" class="muted"></p>',
    '</section>',
    '<p id="error" role="alert"></p>',
    `<script>${SCRIPT}</script>`,
    '</main></body></html>',
  ].join('\n');
  return {
    statusCode: 200,
    headers: {
      'Content-Type': 'text/html; charset=utf-8',
      'Cache-Control': 'no-store',
      // The authorization code arrives in the query string: never send it on as a referrer.
      'Referrer-Policy': 'no-referrer',
      'X-Frame-Options': 'DENY',
      'X-Content-Type-Options': 'nosniff',
      'Content-Security-Policy': contentSecurityPolicy(config.signIn),
    },
    body: html,
  };
}
