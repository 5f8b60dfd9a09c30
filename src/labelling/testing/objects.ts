// Cached objects for unit tests: a labelled object in namespace `shop`, with what a test sets.
import { type LabelledObject, NOT_ADMITTED } from '../object.ts';

export function labelledObject(name: string, fields: Partial<LabelledObject> = {}): LabelledObject {
  return {
    key: `shop/${name}`,
    name,
    namespace: 'shop',
    uid: `uid-${name}`,
    resourceVersion: '1',
    labels: {},
    annotations: {},
    ownedLabels: [],
    ownedAnnotations: [],
    admitted: NOT_ADMITTED,
    deleting: false,
    ...fields,
  };
}
