/**
 * The sparse autoencoders' plan model (pipelines/steps/plan.ts): one SAE per point of the grid,
 * widths x ks; with Claude as the explainer, its label and detection calls.
 */
import { coldModel, type PlanModel, requestInput, WIDEST_UNIT } from '#pipelines/steps/plan.ts';
import { DEFAULT_MAX_ATTEMPTS } from '#shared/claude-requests.ts';
import { DEFAULT_WINDOWS_PER_PROMPT, detectRequestParams } from '#shared/sae/detection.ts';
import { explainRequestParams, MAX_LABEL_CHARS, MAX_TOKEN_CHARS } from '#shared/sae/explain.ts';
import type { SaeConfig } from './config.ts';

export function saePlanModel(config: SaeConfig, options: { readonly startedByUpload?: boolean; readonly claudeKey?: boolean } = {}): PlanModel {
  const { labels } = config;
  const claude = labels.explainer === 'claude' || (labels.explainer === 'auto' && options.claudeKey);
  // Labels: one call per chosen feature (fewer when fewer activate); detection: each feature's own
  // label and a mismatched one, over its detect windows, DEFAULT_WINDOWS_PER_PROMPT a prompt.
  const detectCalls = 2 * labels.features * Math.ceil(labels.detectExamples / DEFAULT_WINDOWS_PER_PROMPT);
  return coldModel({
    pipeline: 'sae',
    startedByUpload: options.startedByUpload,
    claude: () =>
      claude
        ? [
            {
              step: 'label',
              model: labels.model,
              calls: { low: 0, high: labels.features },
              maxOutputTokens: 1024,
              attempts: DEFAULT_MAX_ATTEMPTS,
              maxInput: requestInput(explainRequestParams(worstFeature(config), { model: labels.model })),
              why: 'one per feature that activates enough',
            },
            {
              step: 'detect',
              model: labels.model,
              calls: { low: 0, high: detectCalls },
              maxOutputTokens: 1024,
              attempts: DEFAULT_MAX_ATTEMPTS,
              maxInput: requestInput(
                detectRequestParams(
                  WIDEST_UNIT.repeat(MAX_LABEL_CHARS),
                  Array.from({ length: Math.min(DEFAULT_WINDOWS_PER_PROMPT, labels.detectExamples) }, () => worstWindow(config)),
                  { model: labels.model },
                ),
              ),
              why: 'own and mismatched label, 5 windows a prompt',
            },
          ]
        : [],
    mapItems: (name) => (name === 'saes: Items' ? config.sae.widths.length * config.sae.ks.length : undefined),
  });
}

/**
 * A window at its most: windowTokens tokens (batch-jobs/sae/contexts.py writes windows of that
 * length), each MAX_TOKEN_CHARS UTF-16 units of 3 bytes (the contexts' schema). Real tokens are a
 * few characters, so this bound is far above any real request; it is the one the data's schema gives.
 */
function worstWindow(config: SaeConfig) {
  const tokens = Array.from({ length: config.labels.windowTokens }, () => WIDEST_UNIT.repeat(MAX_TOKEN_CHARS));
  return { tokens, activations: tokens.map(() => 0) };
}

/**
 * A feature's explain prompt at its most: explainExamples windows (three quarters activating,
 * every other token marked, the most marks a window takes; a quarter not), as contexts.py picks them.
 */
function worstFeature(config: SaeConfig) {
  const inactive = Math.floor(config.labels.explainExamples / 4);
  const window = worstWindow(config);
  const marked = { ...window, activations: window.tokens.map((_, i) => (i % 2 ? 0 : 1)) };
  return {
    feature: 0,
    firingRate: 1,
    maxActivation: 1,
    explain: [
      ...Array.from({ length: config.labels.explainExamples - inactive }, () => ({ ...marked, source: 'top' as const })),
      ...Array.from({ length: inactive }, () => ({ ...window, source: 'inactive' as const })),
    ],
    detect: [],
  };
}
