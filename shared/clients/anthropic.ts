/**
 * The Claude model every pipeline that calls Claude asks for unless its config names another.
 *
 * Anthropic retires models on announced dates; a retired id fails every request. This default is
 * one the pinned @anthropic-ai/sdk does not list as deprecated, and a unit test fails as soon as
 * an SDK upgrade lists it (test/unit/rewards-propose.test.ts), so CI catches the next retirement
 * before a user does. Each pipeline keeps the model a config input (`model`), so a user can move
 * to another one without a release.
 */
export const DEFAULT_CLAUDE_MODEL = 'claude-sonnet-5-5';
