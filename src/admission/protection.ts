// Keys only labeller may set (config/protect.ts), as ValidatingAdmissionPolicies
// (admissionregistration.k8s.io/v1, served from Kubernetes 1.30): one policy and binding per kind
// entry with protection, matching its objects at UPDATE. A request from labeller's own identity,
// or one the config allows, is not matched at all (matchConditions); any other that adds, changes
// or removes a protected key, or labeller's marker, fails the policy's one validation, and its
// binding says what the API server does then: refuse it (Deny), tell the client (Warn), or record
// it in the audit log (Audit). The message names labeller, the keys, and where to change them: in
// the config, not on the object.
//
// Never in the way: CREATE is not matched (the mutating policy forces a protected key's value
// there, policy.ts), nor DELETE, nor subresources (status, scale); an update that leaves every
// protected key as it was passes, which is every update the cluster's controllers, the garbage
// collector and finalizers make. failurePolicy Ignore: a policy the API server cannot evaluate lets
// the request through.
import type { MetadataField, Protection } from '../config/model.ts';
import { GROUP_PREFIX, type ProtectMode } from '../config/protect.ts';
import { markerKeys } from '../labelling/admitted.ts';
import { celString } from './cel.ts';
import { policyLabels, policyName } from './names.ts';
import {
  type AdmissionKind,
  API_VERSION,
  type EveryKindAdmission,
  type MatchResources,
  type ObjectMeta,
  targetsOf,
} from './targets.ts';

export interface ProtectionInput {
  readonly fieldManager: string;
  readonly kinds: readonly AdmissionKind[];
  readonly everyKind?: EveryKindAdmission | undefined;
  /** Who may change protected keys: labeller's own user name, and the config's `allow` (users, `group:<name>`). */
  readonly identities: readonly string[];
}

export interface ProtectionPolicy {
  readonly apiVersion: typeof API_VERSION;
  readonly kind: 'ValidatingAdmissionPolicy';
  readonly metadata: ObjectMeta;
  readonly spec: {
    readonly matchConstraints: MatchResources;
    readonly matchConditions: readonly { readonly name: string; readonly expression: string }[];
    readonly variables: readonly { readonly name: string; readonly expression: string }[];
    readonly validations: readonly {
      readonly expression: string;
      readonly messageExpression: string;
      readonly reason: 'Forbidden';
    }[];
    readonly failurePolicy: 'Ignore';
  };
}

export type ValidationAction = 'Deny' | 'Warn' | 'Audit';

export interface ProtectionPolicyBinding {
  readonly apiVersion: typeof API_VERSION;
  readonly kind: 'ValidatingAdmissionPolicyBinding';
  readonly metadata: ObjectMeta;
  readonly spec: { readonly policyName: string; readonly validationActions: readonly ValidationAction[] };
}

const ACTIONS: Readonly<Record<ProtectMode, ValidationAction>> = { deny: 'Deny', warn: 'Warn', audit: 'Audit' };

/** The protecting policies of `input`, each followed by its binding, in name order. */
export function renderProtection(input: ProtectionInput): (ProtectionPolicy | ProtectionPolicyBinding)[] {
  const pairs = targetsOf(input.kinds, input.everyKind, 'UPDATE').flatMap((target) => {
    const { protect, where } = target.kind;
    if (!protect) return [];
    const name = policyName(input.fieldManager, 'protect', ...target.name);
    return [{ name, pair: policy(name, input, target.match, protect, where) }];
  });
  pairs.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return pairs.flatMap(({ pair }) => pair);
}

function policy(
  name: string,
  input: ProtectionInput,
  match: MatchResources,
  protect: Protection,
  where: string,
): [ProtectionPolicy, ProtectionPolicyBinding] {
  const metadata = { name, labels: policyLabels(input.fieldManager) };
  const markers = markerKeys(input.fieldManager);
  const changed = (field: MetadataField, keys: readonly string[], say: string) =>
    keys.length === 0 ? [] : [
      `${
        JSON.stringify(keys)
      }.filter(k, object.metadata.?${field}[?k] != oldObject.metadata.?${field}[?k]).map(k, ${say})`,
    ];
  const labels = [...protect.labels].sort();
  const annotations = [...protect.annotations].sort();
  const changes = [
    ...changed('labels', labels, '"label " + k'),
    ...changed('annotations', annotations, '"annotation " + k'),
    ...changed('annotations', [markers.labels, markers.annotations], `"labeller's marker " + k`),
  ];
  return [
    {
      apiVersion: API_VERSION,
      kind: 'ValidatingAdmissionPolicy',
      metadata,
      spec: {
        matchConstraints: match,
        matchConditions: [{ name: 'not-labeller', expression: notExempt(input.identities) }],
        variables: [{ name: 'changed', expression: changes.join(' +\n') }],
        validations: [{
          expression: 'size(variables.changed) == 0',
          messageExpression: `"labeller keeps " + variables.changed.join(", ") + ${
            celString(
              ` on this object, as its config says (${where}, field manager ${input.fieldManager}): change it there, not on the object`,
            )
          }`,
          reason: 'Forbidden',
        }],
        failurePolicy: 'Ignore',
      },
    },
    {
      apiVersion: API_VERSION,
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata,
      spec: { policyName: name, validationActions: [ACTIONS[protect.mode]] },
    },
  ];
}

/** CEL: the request is from none of `identities` (user names, and `group:<name>`). */
function notExempt(identities: readonly string[]): string {
  const groups = identities.filter((i) => i.startsWith(GROUP_PREFIX)).map((i) => i.slice(GROUP_PREFIX.length));
  const users = identities.filter((i) => !i.startsWith(GROUP_PREFIX));
  return [
    `!(request.userInfo.username in ${JSON.stringify([...new Set(users)].sort())})`,
    ...(groups.length > 0
      ? [`!request.userInfo.groups.exists(g, g in ${JSON.stringify([...new Set(groups)].sort())})`]
      : []),
  ].join(' && ');
}
