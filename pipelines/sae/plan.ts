/**
 * The sparse autoencoders' plan model (pipelines/steps/plan.ts): one SAE per point of the grid,
 * widths x ks; with Claude as the explainer, its label and detection calls.
 */
import { coldModel, type PlanModel } from '#pipelines/steps/plan.ts';
import { DEFAULT_MAX_ATTEMPTS } from '#shared/claude-requests.ts';
import { DEFAULT_WINDOWS_PER_PROMPT } from '#shared/sae/detection.ts';
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
              why: 'one per feature that activates enough',
            },
            {
              step: 'detect',
              model: labels.model,
              calls: { low: 0, high: detectCalls },
              maxOutputTokens: 1024,
              attempts: DEFAULT_MAX_ATTEMPTS,
              why: 'own and mismatched label, 5 windows a prompt',
            },
          ]
        : [],
    mapItems: (name) => (name === 'saes: Items' ? config.sae.widths.length * config.sae.ks.length : undefined),
  });
}
