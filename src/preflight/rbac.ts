// What is missing, as RBAC to apply: a ClusterRole for rights needed in every namespace (or on
// cluster-scoped resources), a Role in each namespace for the rest, each bound to the identity
// that was asked about. Rights of one object are granted by resourceNames, as the chart grants
// them; everything else by resource.
import type { Need } from './needs.ts';

/** Who the bindings name: a ServiceAccount (from its user name), a User, or a placeholder when the API server would not say. */
export type Subject =
  | { readonly kind: 'ServiceAccount'; readonly name: string; readonly namespace: string }
  | { readonly kind: 'User'; readonly name: string };

/** The subject of a user name as the API server reports it: `system:serviceaccount:<ns>:<name>` is a ServiceAccount. */
export function subjectOf(username: string): Subject {
  const sa = username.match(/^system:serviceaccount:([^:]+):([^:]+)$/);
  return sa ? { kind: 'ServiceAccount', namespace: sa[1]!, name: sa[2]! } : { kind: 'User', name: username };
}

/** One YAML stream granting `missing` to `subject`, named `name` (a Role per namespace, a ClusterRole for the rest). */
export function rbacFor(missing: readonly Need[], subject: Subject | undefined, name: string): string {
  const byScope = new Map<string, Need[]>();
  for (const need of missing) byScope.set(need.namespace, [...(byScope.get(need.namespace) ?? []), need]);
  const documents = [...byScope].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).flatMap(([namespace, needs]) => {
    const cluster = namespace === '';
    const [role, binding] = cluster ? ['ClusterRole', 'ClusterRoleBinding'] : ['Role', 'RoleBinding'];
    const meta = `metadata:\n  name: ${name}\n${cluster ? '' : `  namespace: ${namespace}\n`}`;
    return [
      `apiVersion: rbac.authorization.k8s.io/v1\nkind: ${role}\n${meta}rules:\n${rules(needs)}`,
      `apiVersion: rbac.authorization.k8s.io/v1\nkind: ${binding}\n${meta}roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ${role}\n  name: ${name}\nsubjects:\n${
        subjectYaml(subject)
      }`,
    ];
  });
  return documents.map((document) => `---\n${document}`).join('');
}

/** The rules of `needs`: one per group, resource and object name, its verbs merged, in a stable order. */
function rules(needs: readonly Need[]): string {
  const merged = new Map<string, { group: string; resource: string; name: string | undefined; verbs: Set<string> }>();
  for (const need of needs) {
    const key = JSON.stringify([need.group, need.resource, need.name ?? '']);
    const rule = merged.get(key) ?? { group: need.group, resource: need.resource, name: need.name, verbs: new Set() };
    for (const verb of need.verbs) rule.verbs.add(verb);
    merged.set(key, rule);
  }
  return [...merged].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, rule]) =>
    `  - apiGroups: [${JSON.stringify(rule.group)}]\n    resources: [${rule.resource}]\n${
      rule.name === undefined ? '' : `    resourceNames: [${JSON.stringify(rule.name)}]\n`
    }    verbs: [${[...rule.verbs].sort().join(', ')}]\n`
  ).join('');
}

function subjectYaml(subject: Subject | undefined): string {
  if (subject === undefined) {
    return '  # the identity labeller runs as: the API server would not say (SelfSubjectReview)\n';
  }
  if (subject.kind === 'ServiceAccount') {
    return `  - kind: ServiceAccount\n    name: ${subject.name}\n    namespace: ${subject.namespace}\n`;
  }
  return `  - apiGroup: rbac.authorization.k8s.io\n    kind: User\n    name: ${JSON.stringify(subject.name)}\n`;
}
