/**
 * Label syntax for labeller code. The rules live in kube/labelsyntax.ts because
 * label selectors need them too, and kube/ must not depend on labeller/.
 */
export { validateAnnotationKey, validateLabelKey, validateLabelValue } from '../kube/labelsyntax.ts';
export type { Labels } from '../kube/labelsyntax.ts';
