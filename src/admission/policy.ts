// The config as MutatingAdmissionPolicies (admissionregistration.k8s.io/v1), so that objects carry
// their labels from the moment they are created: one policy and binding per kind entry, and one
// more per ConfigMap source its keys read (a policy reads one, as its params). Each sets, at
// CREATE, the keys CEL can render as the controller would, and records them in the marker
// (marker.ts). A policy never blocks a create: failurePolicy Ignore covers its own errors, and
// what it writes must pass the API server's validation too, which no failure policy covers. So
// it never sets a label value the API server would refuse, and sets only what keeps the object's
// annotations, markers included, under the API server's 256 KiB: all it renders if that fits,
// else its labels and their marker, else nothing. The rules CEL cannot render are returned, with
// why, and left to the controller. CREATE only: what changes later is the controller's, which
// knows what it owns; a policy at UPDATE would put back a key a user removed.
import { ANNOTATIONS_MAX_BYTES, type KindConfig, type MetadataField } from '../config/model.ts';
import type { SourceSpec } from '../config/sources.ts';
import type { Template } from '../config/template.ts';
import { groupResource } from '../apimachinery/resource.ts';
import { type CelScope, celString, templateCel, validLabelValue } from './cel.ts';
import { markerKeys } from '../labelling/admitted.ts';
import { annotationBytesCel, keptEntriesCel, markerCel, markerEntryCel, utf8BytesCel } from './marker.ts';
import { policyLabels, policyName } from './names.ts';
import { type ProtectionPolicy, type ProtectionPolicyBinding, renderProtection } from './protection.ts';
import {
  type AdmissionKind,
  API_VERSION,
  type EveryKindAdmission,
  type MatchResources,
  type ObjectMeta,
  type Target,
  targetsOf,
} from './targets.ts';

const FIELDS: readonly MetadataField[] = ['labels', 'annotations'];
export interface AdmissionInput {
  /** Names and labels the policies (names.ts). */
  readonly fieldManager: string;
  readonly kinds: readonly AdmissionKind[];
  readonly everyKind?: EveryKindAdmission | undefined;
  readonly sources: ReadonlyMap<string, SourceSpec>;
  /**
   * Who may change protected keys (protection.ts): labeller's own user name and the config's
   * `allow`; without it (labeller's identity unknown) no protecting policy is rendered, since it
   * would refuse labeller its own writes.
   */
  readonly identities?: readonly string[] | undefined;
}

/** A rule (one key of one entry) admission leaves to the controller. */
export interface ControllerRule {
  /** The entry, as the config says where: 'kinds.yaml: kinds[0]'. */
  readonly entry: string;
  /** The kind, as groupResource names it, or '*'. */
  readonly resource: string;
  readonly field: MetadataField;
  readonly key: string;
  readonly template: string;
  readonly why: string;
}

/** A policy or binding labeller renders. */
export type AdmissionObject = AdmissionPolicy | AdmissionPolicyBinding | ProtectionPolicy | ProtectionPolicyBinding;

export interface Admission {
  /** The mutating policies, then the protecting ones; each policy followed by its binding, in name order. */
  readonly objects: readonly AdmissionObject[];
  /** In the order of the entries, then of the keys. */
  readonly controllerRules: readonly ControllerRule[];
}

export interface AdmissionPolicy {
  readonly apiVersion: typeof API_VERSION;
  readonly kind: 'MutatingAdmissionPolicy';
  readonly metadata: ObjectMeta;
  readonly spec: {
    readonly paramKind?: { readonly apiVersion: 'v1'; readonly kind: 'ConfigMap' };
    readonly matchConstraints: MatchResources;
    readonly variables: readonly { readonly name: string; readonly expression: string }[];
    readonly mutations: readonly {
      readonly patchType: 'ApplyConfiguration';
      readonly applyConfiguration: { readonly expression: string };
    }[];
    readonly failurePolicy: 'Ignore';
    readonly reinvocationPolicy: 'Never';
  };
}

export interface AdmissionPolicyBinding {
  readonly apiVersion: typeof API_VERSION;
  readonly kind: 'MutatingAdmissionPolicyBinding';
  readonly metadata: ObjectMeta;
  readonly spec: {
    readonly policyName: string;
    readonly paramRef?: {
      readonly name: string;
      readonly namespace: string;
      readonly parameterNotFoundAction: 'Allow';
    };
  };
}

/** The policies of `input`, and the rules they leave to the controller. */
export function renderAdmission(input: AdmissionInput): Admission {
  const targets = targetsOf(input.kinds, input.everyKind, 'CREATE');
  const objects: { name: string; pair: [AdmissionPolicy, AdmissionPolicyBinding] }[] = [];
  const controllerRules: ControllerRule[] = [];
  for (const target of targets) {
    const scope: CelScope = { resource: target.resource, sources: input.sources };
    const bySource = new Map<string | undefined, Rule[]>();
    for (const field of FIELDS) {
      for (const [key, template] of [...target.kind[field]].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
        const cel = templateCel(template, scope);
        if ('why' in cel) {
          controllerRules.push({
            entry: target.kind.where,
            resource: target.resource ? groupResource(target.resource) : '*',
            field,
            key,
            template: template.source,
            why: cel.why,
          });
          continue;
        }
        bySource.set(cel.source, [...(bySource.get(cel.source) ?? []), { field, key, template, cel: cel.cel }]);
      }
    }
    for (const [source, rules] of bySource) {
      const name = policyName(input.fieldManager, ...target.name, ...(source === undefined ? [] : [source]));
      const origin = source === undefined ? undefined : input.sources.get(source)!.origin;
      const params = origin?.type === 'configMap' ? { name: origin.name, namespace: origin.namespace } : undefined;
      // The keys the entry's other policies set: their marker entries are kept, the rest replaced.
      const others = (field: MetadataField) =>
        [...bySource].filter(([other]) => other !== source).flatMap(([, theirs]) =>
          theirs.filter((rule) => rule.field === field).map((rule) => rule.key)
        );
      const siblings = { labels: others('labels'), annotations: others('annotations') };
      objects.push({ name, pair: policy(name, input.fieldManager, target, rules, siblings, params) });
    }
  }
  objects.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const protecting = input.identities === undefined ? [] : renderProtection({ ...input, identities: input.identities });
  return { objects: [...objects.flatMap(({ pair }) => pair), ...protecting], controllerRules };
}

/** One key CEL can render. */
interface Rule {
  readonly field: MetadataField;
  readonly key: string;
  readonly template: Template;
  /** Its value, an optional string. */
  readonly cel: string;
}

/**
 * The policy setting `rules` on what `target` matches, and its binding (to `params`, the
 * ConfigMap they read); `siblings`: the keys the entry's other policies set.
 */
function policy(
  name: string,
  fieldManager: string,
  target: Target,
  rules: readonly Rule[],
  siblings: Readonly<Record<MetadataField, readonly string[]>>,
  params: { readonly name: string; readonly namespace: string } | undefined,
): [AdmissionPolicy, AdmissionPolicyBinding] {
  const metadata = { name, labels: policyLabels(fieldManager) };
  const variables: { name: string; expression: string }[] = [];
  const markers = markerKeys(fieldManager);
  /** Per map, its entries in the apply configuration: the keys set, then (in annotations) the markers. */
  const entries: Record<MetadataField, string[]> = { labels: [], annotations: [] };
  /** CEL: the bytes each annotation written adds (ints), markers included. */
  const added: string[] = [];
  /** Protected labels' entries: set even when their marker does not fit, so no create carries another value. */
  const guarded: string[] = [];
  /** Which maps the policy writes; the labels' marker, as an entry and as the bytes it adds. */
  const fields: MetadataField[] = [];
  let labelsMarker: { readonly entry: string; readonly bytes: string } | undefined;
  for (const field of FIELDS) {
    const ofField = rules.filter((rule) => rule.field === field);
    if (ofField.length === 0) continue;
    fields.push(field);
    const names = ofField.map((_, i) => `${field === 'labels' ? 'label' : 'annotation'}${i}`);
    ofField.forEach((rule, i) => {
      variables.push({
        name: names[i]!,
        expression: `// ${rule.key}: ${JSON.stringify(rule.template.source)}\n${set(rule, target.kind)}`,
      });
      const entry = `?${celString(rule.key)}: variables.${names[i]}.optMap(v, string(v))`;
      entries[field].push(entry);
      if (field === 'labels' && target.kind.protect?.labels.has(rule.key)) guarded.push(entry);
      if (field === 'annotations') {
        added.push(`variables.${names[i]}.optMap(v, ${annotationBytesCel(rule.key, 'string(v)')}).orValue(0)`);
      }
    });
    const suffix = field === 'labels' ? 'Labels' : 'Annotations';
    variables.push({
      name: `admitted${suffix}`,
      expression: ofField.map((rule, i) =>
        `variables.${names[i]}.optMap(v, [${markerEntryCel(field, rule.key, 'string(v)')}]).orValue([])`
      ).join(' +\n'),
    });
    const kept = keptEntriesCel(markers[field], siblings[field]);
    if (kept !== undefined) {
      variables.push({ name: `entries${suffix}`, expression: `${kept} +\nvariables.admitted${suffix}` });
    }
    variables.push({
      name: `marker${suffix}`,
      expression: markerCel(markers[field], `variables.${kept === undefined ? 'admitted' : 'entries'}${suffix}`),
    });
    const entry = `?${celString(markers[field])}: variables.marker${suffix}.optMap(m, string(m))`;
    entries.annotations.push(entry);
    const bytes = `variables.marker${suffix}.optMap(m, ${annotationBytesCel(markers[field], 'm')}).orValue(0)`;
    added.push(bytes);
    if (field === 'labels') labelsMarker = { entry, bytes };
  }
  // The annotations the object carries, each counted in full (those a policy replaces too): a
  // bound that errs on the safe side; the controller, which knows, writes what was left out.
  variables.push({
    name: 'annotationBytes',
    expression: `object.metadata.?annotations.optMap(a, a.map(k, ${utf8BytesCel('k')} + ${
      utf8BytesCel('a[k]')
    }).sum()).orValue(0)`,
  });
  const within = (bytes: readonly string[]) =>
    `variables.annotationBytes + ${bytes.join(' + ')} <= ${ANNOTATIONS_MAX_BYTES}`;
  variables.push({ name: 'fits', expression: within(added) });
  const object = (maps: Readonly<Record<MetadataField, readonly string[]>>) => {
    const body = FIELDS.filter((field) => maps[field].length > 0).map((field) =>
      `  ${field}: {\n${maps[field].map((entry) => `    ${entry}`).join(',\n')}\n  }`
    );
    return `Object{metadata: Object.metadata{\n${body.join(',\n')}\n}}`;
  };
  // Nothing fits: only the protected labels, without a marker (labels count nothing toward the
  // limit; unmarked, they are the creator's, which the controller leaves when the config drops them).
  const none = guarded.length > 0 ? object({ labels: guarded, annotations: [] }) : 'Object{}';
  let expression = `variables.fits ? ${object(entries)} : ${none}`;
  // Annotations too: if they do not fit, the labels and their marker alone may.
  if (fields.length === 2 && labelsMarker !== undefined) {
    variables.push({ name: 'labelsFit', expression: within([labelsMarker.bytes]) });
    const labelsOnly = { labels: entries.labels, annotations: [labelsMarker.entry] };
    expression = `variables.fits ? ${object(entries)} :\nvariables.labelsFit ? ${object(labelsOnly)} : ${none}`;
  }
  return [
    {
      apiVersion: API_VERSION,
      kind: 'MutatingAdmissionPolicy',
      metadata,
      spec: {
        ...(params ? { paramKind: { apiVersion: 'v1', kind: 'ConfigMap' } } : {}),
        matchConstraints: target.match,
        variables,
        mutations: [{ patchType: 'ApplyConfiguration', applyConfiguration: { expression } }],
        failurePolicy: 'Ignore',
        reinvocationPolicy: 'Never',
      },
    },
    {
      apiVersion: API_VERSION,
      kind: 'MutatingAdmissionPolicyBinding',
      metadata,
      spec: {
        policyName: name,
        ...(params ? { paramRef: { ...params, parameterNotFoundAction: 'Allow' } } : {}),
      },
    },
  ];
}

/**
 * CEL: the value `rule` sets, an optional string: none when its template is absent, when it
 * renders an invalid label value (the controller reports it; at admission it is not set), or
 * under `skip` when the request carries the key, unless the key is protected: a protected key is
 * forced whatever `conflicts` says, so that no create brings in another value.
 */
function set(rule: Rule, kind: KindConfig): string {
  // A constant was checked when the config loaded.
  const valid = rule.field === 'labels' && rule.template.constantValue === undefined
    ? `${rule.cel}.optFlatMap(v, ${validLabelValue('v')} ? optional.of(v) : optional.none())`
    : rule.cel;
  if (kind.conflicts === 'force' || kind.protect?.[rule.field].has(rule.key)) return valid;
  return `object.metadata.?${rule.field}[?${celString(rule.key)}].hasValue() ? optional.none() : ${valid}`;
}
