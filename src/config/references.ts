// The `references:` of kinds.yaml, and the built-in ones: related objects named by a field, read
// by templates under the reference's name ("{{node.labels.topology.kubernetes.io/zone}}") as they
// read `owner.*`. This is the relation the controller patterns call "watched" (kube-rs's
// Controller::watches, controller-runtime's Watches with a map function), declared rather than
// coded, in either direction:
//  - forward: a field of the labelled object names the related object (a pod's spec.nodeName);
//  - reverse: a field of the related objects names the labelled one (an HPA's scaleTargetRef, the
//    pods whose volumes name a PVC). Several may: a value is read only where they all agree.
//
//   references:
//     backup:                    # forward
//       of: deployments          # the labelled kind whose field names the related object
//       field: spec.template.metadata.annotations["example.com/backup-policy"]
//       to: backuppolicies.example.com       # the kind it names (kubectl-style)
//       namespaceField: spec.policyNamespace # optional: where the related object's namespace is;
//                                            # by default the labelled object's own
//     restoredBy:                # reverse
//       from: restores.example.com           # the kind whose field names the labelled object
//       field: spec.targets[*].name          # [*]: every item of a list
//       to: persistentvolumeclaims           # the labelled kind it names; or kindField, where
//       kindField: spec.targets[*].kind      #   the referring object says (scaleTargetRef.kind)
import { isDns1123Label } from '../apimachinery/names.ts';
import { expectMapping, expectString, fail, isAbsent, rejectUnknownFields, resourceProblem } from './fields.ts';
import { type ObjectField, parseObjectField, TemplateError } from './template.ts';

/** A related object named by a field of the labelled object. */
export interface ForwardReference {
  readonly direction: 'forward';
  /** What templates call it: `{{<name>.labels.<key>}}`. */
  readonly name: string;
  /** The labelled kind whose field names it (kubectl-style); the reference means nothing on another kind. */
  readonly of: string;
  /** The field of the labelled object holding the related object's name. */
  readonly field: ObjectField;
  /** The kind it names (kubectl-style). */
  readonly to: string;
  /** The field holding the related object's namespace; undefined: the labelled object's own (for a namespaced one). */
  readonly namespaceField: ObjectField | undefined;
  /** Where it was declared, for messages: 'built in', or 'kinds.yaml: references.backup'. */
  readonly where: string;
}

/** The related objects whose field names the labelled object, in its namespace. */
export interface ReverseReference {
  readonly direction: 'reverse';
  readonly name: string;
  /** The kind of the related objects (kubectl-style). */
  readonly from: string;
  /** Their field holding the labelled object's name; `[*]` for every item of a list. */
  readonly field: ObjectField;
  /** The labelled kind it names (kubectl-style); undefined: any kind `kindField` names. */
  readonly to: string | undefined;
  /** Their field holding the labelled object's kind (`Deployment`), beside `field` item for item. */
  readonly kindField: ObjectField | undefined;
  readonly where: string;
}

export type ReferenceSpec = ForwardReference | ReverseReference;

const forward = (name: string, of: string, field: string, to: string, namespaceField?: string): ReferenceSpec => ({
  direction: 'forward',
  name,
  of,
  field: parseObjectField(field),
  to,
  namespaceField: namespaceField === undefined ? undefined : parseObjectField(namespaceField),
  where: 'built in',
});

const reverse = (name: string, from: string, field: string, to?: string, kindField?: string): ReferenceSpec => ({
  direction: 'reverse',
  name,
  from,
  field: parseObjectField(field, true),
  to,
  kindField: kindField === undefined ? undefined : parseObjectField(kindField, true),
  where: 'built in',
});

/** The references every config knows, by name: the common ones of the core API. */
export const BUILTIN_REFERENCES: ReadonlyMap<string, ReferenceSpec> = new Map(
  [
    // A pod's node: zone, instance and capacity type, node pool (kubernetes#40610).
    forward('node', 'pods', 'spec.nodeName', 'nodes'),
    forward('serviceAccount', 'pods', 'spec.serviceAccountName', 'serviceaccounts'),
    // A PV's claim, in any namespace: PVs are cluster-scoped, so they escape namespace-based cost splits.
    forward('claim', 'persistentvolumes', 'spec.claimRef.name', 'persistentvolumeclaims', 'spec.claimRef.namespace'),
    forward('volume', 'persistentvolumeclaims', 'spec.volumeName', 'persistentvolumes'),
    // The HorizontalPodAutoscaler scaling a workload (kube-rs's example of a watched relation).
    reverse(
      'scaler',
      'horizontalpodautoscalers.autoscaling',
      'spec.scaleTargetRef.name',
      undefined,
      'spec.scaleTargetRef.kind',
    ),
    // The pods mounting a PVC, so that storage is booked to the workload using it.
    reverse('mountedBy', 'pods', 'spec.volumes[*].persistentVolumeClaim.claimName', 'persistentvolumeclaims'),
  ].map((reference) => [reference.name, reference]),
);

/** Names a reference may not take: the template variables they would hide. */
const RESERVED = new Set([
  'name',
  'namespace',
  'kind',
  'resource',
  'group',
  'apiVersion',
  'uid',
  'labels',
  'annotations',
  'spec',
  'status',
  'owner',
  'root',
]);

const FORWARD_FIELDS = ['of', 'field', 'to', 'namespaceField'];
const REVERSE_FIELDS = ['from', 'field', 'to', 'kindField'];

/** The file's `references:` with the built-in ones, by name. */
export function parseReferences(value: unknown, where: string): ReadonlyMap<string, ReferenceSpec> {
  if (isAbsent(value)) return BUILTIN_REFERENCES;
  const declared = expectMapping(value, where, 'a mapping of reference names to {of, field, to} or {from, field, to}');
  const references = new Map(BUILTIN_REFERENCES);
  for (const [name, spec] of Object.entries(declared)) {
    references.set(name, parseReference(name, spec, `${where}.${name}`));
  }
  return references;
}

function parseReference(name: string, spec: unknown, at: string): ReferenceSpec {
  if (RESERVED.has(name)) throw fail(at, `"${name}" is a template variable already: give the reference another name`);
  const builtin = BUILTIN_REFERENCES.get(name);
  if (builtin) {
    throw fail(at, `"${name}" is a built-in reference (${describeReference(builtin)}): give yours another name`);
  }
  if (!/^[a-z][A-Za-z0-9]*$/.test(name) || !isDns1123Label(name.toLowerCase())) {
    throw fail(at, 'a reference name is a word in lowerCamelCase, e.g. "backupPolicy"');
  }
  const fields = expectMapping(
    spec,
    at,
    'a mapping such as {of: deployments, field: spec.policyName, to: policies.example.com}',
  );
  const isReverse = !isAbsent(fields.from);
  if (isReverse && !isAbsent(fields.of)) {
    throw fail(
      at,
      '"of" (a field of the labelled object names the related one) or "from" (a field of the related objects names the labelled one), not both',
    );
  }
  rejectUnknownFields(fields, isReverse ? REVERSE_FIELDS : FORWARD_FIELDS, at);
  const resource = (key: 'of' | 'to' | 'from', required: boolean) => {
    if (isAbsent(fields[key])) {
      if (required) throw fail(`${at}.${key}`, 'required: a kubectl-style resource name, e.g. "deployments"');
      return undefined;
    }
    const text = expectString(fields[key], `${at}.${key}`);
    const problem = resourceProblem(text);
    if (problem !== undefined) throw fail(`${at}.${key}`, problem);
    return text;
  };
  const path = (key: 'field' | 'namespaceField' | 'kindField') => {
    if (isAbsent(fields[key])) return undefined;
    const text = expectString(fields[key], `${at}.${key}`);
    try {
      // Many related objects may name the labelled one, and one of them in many items of a list.
      return parseObjectField(text, isReverse);
    } catch (error) {
      if (error instanceof TemplateError) throw fail(`${at}.${key}`, error.message);
      throw error;
    }
  };
  const field = path('field');
  if (field === undefined) {
    throw fail(`${at}.field`, 'required: the path of the field that names the related object, e.g. spec.nodeName');
  }
  if (!isReverse) {
    return {
      direction: 'forward',
      name,
      of: resource('of', true)!,
      field,
      to: resource('to', true)!,
      namespaceField: path('namespaceField'),
      where: at,
    };
  }
  const to = resource('to', false);
  const kindField = path('kindField');
  if (to === undefined && kindField === undefined) {
    throw fail(
      at,
      'say which labelled kind the field names: "to" (e.g. persistentvolumeclaims), or "kindField" where the related object says (e.g. spec.scaleTargetRef.kind)',
    );
  }
  return { direction: 'reverse', name, from: resource('from', true)!, field, to, kindField, where: at };
}

/** What decides a reference's meaning, as plain data: for fingerprints and comparisons. */
export function referenceDocument(reference: ReferenceSpec): Record<string, string> {
  const path = (field: ObjectField | undefined) => field?.path ?? '';
  return reference.direction === 'forward'
    ? {
      name: reference.name,
      of: reference.of,
      field: reference.field.path,
      to: reference.to,
      namespaceField: path(reference.namespaceField),
    }
    : {
      name: reference.name,
      from: reference.from,
      field: reference.field.path,
      to: reference.to ?? '',
      kindField: path(reference.kindField),
    };
}

/** "pods' spec.nodeName names an object of nodes", for messages. */
export function describeReference(reference: ReferenceSpec): string {
  if (reference.direction === 'reverse') {
    const kind = reference.to ?? `the kind ${reference.kindField!.path} names`;
    return `${reference.from}' ${reference.field.path} names an object of ${kind}`;
  }
  const namespace = reference.namespaceField ? ` in the namespace ${reference.namespaceField.path} names` : '';
  return `${reference.of}' ${reference.field.path} names an object of ${reference.to}${namespace}`;
}
