/**
 * Where the refinery's language rule (filters.ts) finds fastText's lid.176 model: the bundling of
 * a function that runs the rule (pipelines/steps/function.ts) copies it from the package to
 * beside the bundle, and the rule looks there first.
 */

/** The model file's name, as shipped beside a bundle that runs the language rule. */
export const LANGUAGE_MODEL_FILE = 'lid.176.ftz';
/** Where the model is in node_modules: the bundling copies it from here. */
export const LANGUAGE_MODEL_PACKAGE_PATH = 'fasttext.wasm.js/dist/models/language-identification/assets/lid.176.ftz';
