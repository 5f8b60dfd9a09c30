// Every option of the command line: its name (as Kubernetes components name theirs, where they
// have one), type, section of --help, default and former names. The environment variable of an
// option is LABELLER_ + its upper snake case. Parsed by options.ts, shown by help.ts.
import { LEVELS } from '../util/log.ts';

export type Kind = 'list' | 'string' | 'duration' | 'count' | 'address' | 'port' | 'boolean';

/** The sections of --help. */
export const GROUPS = ['What to label', 'Cluster', 'Behaviour', 'Operations'] as const;

export interface Spec {
  readonly kind: Kind;
  readonly group: (typeof GROUPS)[number];
  readonly describe: string;
  readonly default?: string;
  readonly choices?: readonly string[];
  /** A one-letter alias (`-n`). */
  readonly short?: string;
  /** Former names, still accepted as flags and as LABELLER_* variables. */
  readonly aliases?: readonly string[];
  /** The value's placeholder in --help, when the kind's own (<duration>, <n>…) says too little. */
  readonly value?: string;
  /** What separates a list's items within one value; ',' unless the items may hold commas. */
  readonly separator?: string;
}

/**
 * Every option, named as on the command line (as Kubernetes components name theirs where they
 * have one); the environment variable is LABELLER_ + its upper snake case.
 */
export const SPECS = {
  kinds: {
    kind: 'list',
    group: 'What to label',
    value: '<kind,...>',
    describe:
      "resource kinds to label, kubectl-style (deploy, services, deployments.apps, a CRD plural); '*' for every kind discovery serves (see --exclude-kinds)",
  },
  'exclude-kinds': {
    kind: 'list',
    group: 'What to label',
    value: '<kind,...>',
    describe:
      "with the '*' kind: kinds to leave out, kubectl-style, besides the default exclusions (events, leases, endpoints…)",
  },
  'all-kinds': {
    kind: 'boolean',
    group: 'What to label',
    describe:
      'prune only: every kind the API server lists and patches (from discovery), instead of the configured ones',
  },
  config: {
    kind: 'string',
    group: 'What to label',
    short: 'c',
    value: '<file>',
    describe: 'kinds.yaml with labels and kinds',
  },
  label: {
    kind: 'list',
    group: 'What to label',
    value: '<key=value>',
    describe: "a label for every kind; repeatable (overrides the config file's global labels)",
  },
  annotation: {
    kind: 'list',
    group: 'What to label',
    value: '<key=value>',
    separator: '\n',
    describe:
      "an annotation for every kind; repeatable, values may hold commas (overrides the config file's global annotations; in the environment, one per line)",
  },
  namespace: {
    kind: 'list',
    group: 'What to label',
    short: 'n',
    value: '<ns,...>',
    describe: 'namespaces to watch (default: all); repeatable or comma-separated',
  },
  selector: {
    kind: 'string',
    group: 'What to label',
    short: 'l',
    value: '<selector>',
    describe: 'label selector: only label objects that match it (e.g. app=web,tier!=db)',
  },
  conflicts: {
    kind: 'string',
    group: 'What to label',
    choices: ['force', 'skip'],
    describe:
      'when another field manager owns a label: take it over (force, the default unless the config says otherwise), or leave it and report it (skip)',
  },
  protect: {
    kind: 'string',
    group: 'What to label',
    choices: ['deny', 'warn', 'audit', 'off'],
    describe:
      "keys only labeller may set: with --admission-policies, ValidatingAdmissionPolicies make the API server refuse (deny), warn about or audit any change of them by another identity; overrides the config's protect mode (off: none)",
  },
  kubeconfig: {
    kind: 'string',
    group: 'Cluster',
    value: '<file>',
    describe: 'kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)',
  },
  context: { kind: 'string', group: 'Cluster', value: '<name>', describe: 'kubeconfig context to use' },
  as: {
    kind: 'string',
    group: 'Cluster',
    value: '<user>',
    describe:
      "act as this user, as kubectl --as does (e.g. system:serviceaccount:labeller:labeller): status and --once --dry-run then check that identity's rights",
  },
  'field-manager': {
    kind: 'string',
    group: 'Cluster',
    value: '<name>',
    default: 'labeller',
    describe: "server-side apply field manager that owns labeller's labels",
  },
  'ignore-field-manager-guard': {
    kind: 'boolean',
    group: 'Cluster',
    describe:
      "write even when a running labeller with another config holds --field-manager (the two will remove each other's labels)",
  },
  'dry-run': {
    kind: 'boolean',
    group: 'Behaviour',
    describe: 'write nothing; print the label changes that would be made',
  },
  once: {
    kind: 'boolean',
    group: 'Behaviour',
    describe: 'converge every matching object once, print a summary and exit (0: all done, 1: failures)',
  },
  'admission-policies': {
    kind: 'boolean',
    group: 'Behaviour',
    describe:
      "the controller also keeps the config's MutatingAdmissionPolicies applied (those labeller admission prints), so objects carry their labels from their create (Kubernetes 1.36 and later; older servers: controller only); prune removes them, status says which are in force",
  },
  'admission-policies-owner': {
    kind: 'string',
    group: 'Behaviour',
    value: '<kind>/<name>',
    describe:
      'with --admission-policies: a cluster-scoped object the policies depend on, so the garbage collector removes them with it (the chart: its ClusterRole for them, which helm uninstall removes); without one, a controller with neither --leader-elect nor --shards removes them as it stops',
  },
  'policy-reports': {
    kind: 'boolean',
    group: 'Behaviour',
    describe:
      'the controller also keeps a wgpolicyk8s.io PolicyReport per namespace (and a ClusterPolicyReport) of the labels not as the config wants: conflicts, fights, invalid values, keys with no value (fail), held keys (warn), as Policy Reporter shows them; needs the CRDs (the chart ships them)',
  },
  'policy-reports-owner': {
    kind: 'string',
    group: 'Behaviour',
    value: '<kind>/<name>',
    describe:
      'with --policy-reports: a cluster-scoped object the reports depend on, so the garbage collector removes them with it (the chart: its ClusterRole for them, which helm uninstall removes); without one, they stay until deleted',
  },
  coverage: {
    kind: 'boolean',
    group: 'Behaviour',
    describe:
      'status only: per kind and configured label, the share of objects carrying its desired value, and why the rest do not',
  },
  preflight: {
    kind: 'boolean',
    group: 'Behaviour',
    default: 'true',
    describe:
      'status and --once --dry-run: ask the API server whether labeller may do all it needs (SelfSubjectAccessReview), print the RBAC for what is missing and exit 3',
  },
  output: {
    kind: 'string',
    group: 'Behaviour',
    short: 'o',
    choices: ['table', 'json', 'yaml'],
    default: 'table',
    describe:
      'status and explain: a table, or one JSON document (for CI gates); admission: yaml (its default, to commit) or json (a List)',
  },
  concurrency: {
    kind: 'count',
    group: 'Behaviour',
    default: '8',
    describe: 'objects reconciled at the same time, per kind',
  },
  'requeue-after': {
    kind: 'duration',
    group: 'Behaviour',
    default: '5m',
    describe: 'period of the re-check of every object (jittered ±10 %); 0 disables it',
  },
  'grace-period': {
    kind: 'duration',
    group: 'Behaviour',
    default: '30s',
    describe: 'on SIGTERM, how long running patches may take to finish',
  },
  'watch-timeout': {
    kind: 'duration',
    group: 'Behaviour',
    default: '290s',
    describe: 'server-side timeout of each watch; a watch silent for longer (plus a margin) is reopened',
  },
  'log-level': {
    kind: 'string',
    group: 'Operations',
    default: 'info',
    choices: LEVELS,
    describe: 'least severe level logged',
  },
  'log-format': {
    kind: 'string',
    group: 'Operations',
    default: 'auto',
    choices: ['auto', 'json', 'text'],
    describe: 'json lines, or readable text (auto: text on a terminal)',
  },
  events: {
    kind: 'boolean',
    group: 'Operations',
    default: 'true',
    describe:
      "write Kubernetes Events (events.k8s.io/v1) on objects whose labels are left to another manager or cannot be rendered, and on labeller's Pod for kinds refused; aggregated and rate-limited; --events=false turns them off (off with --dry-run)",
  },
  'metrics-bind-address': {
    kind: 'address',
    group: 'Operations',
    default: '0',
    describe: 'where /metrics is served, host:port (:8080 = every interface); 0 turns it off',
  },
  'health-probe-bind-address': {
    kind: 'address',
    group: 'Operations',
    default: '0',
    describe: 'where /healthz and /readyz are served; the same address as metrics shares one server; 0 turns it off',
  },
  'http-port': {
    kind: 'port',
    group: 'Operations',
    describe: 'shorthand: metrics and probes on :<port>, every interface (either bind address wins over it)',
  },
  'leader-elect': {
    kind: 'boolean',
    group: 'Operations',
    describe: 'run several replicas: only the holder of a Lease writes',
  },
  shards: {
    kind: 'string',
    group: 'Operations',
    choices: ['off', 'auto'],
    default: 'off',
    describe:
      "run several replicas that all write, each its share of the namespaces (auto: split over the live members of the shard group, on Leases); instead of --leader-elect. With prune: wait until no member holds its Lease; with status and --once --dry-run: the preflight asks for the members' Leases",
  },
  'shard-group': {
    kind: 'string',
    group: 'Operations',
    value: '<name>',
    default: 'labeller',
    describe: "the shard group's name: its members' Leases are <name>-member-<hash>, in the leader-election namespace",
  },
  'shard-config-skew': {
    kind: 'duration',
    group: 'Operations',
    default: '2m',
    describe:
      "how long members of a shard group may run different configs (a change reaching every pod: the kubelet's sync period and its cache's) before those not on the newest give their buckets up to the others until they load it, reported as an Event, a /readyz note, labeller_shard_stale_config_members and a log line; the newest is the one with the greatest generation: in kinds.yaml",
  },
  'leader-elect-resource-namespace': {
    kind: 'string',
    group: 'Operations',
    value: '<ns>',
    aliases: ['leader-election-namespace'],
    describe:
      "namespace of the Lease (default: the pod's namespace in a cluster, else the kubeconfig context's, else default)",
  },
  'leader-elect-resource-name': {
    kind: 'string',
    group: 'Operations',
    value: '<name>',
    aliases: ['leader-election-id'],
    default: 'labeller',
    describe: 'name of the Lease',
  },
  'leader-elect-lease-duration': {
    kind: 'duration',
    group: 'Operations',
    aliases: ['lease-duration'],
    default: '15s',
    describe:
      'how long a standby waits before taking over a lease that is no longer renewed (and the shard members before taking over a member that stopped)',
  },
  'leader-elect-renew-deadline': {
    kind: 'duration',
    group: 'Operations',
    aliases: ['renew-deadline'],
    default: '10s',
    describe: 'how long the leader retries renewing before it gives up leadership and exits',
  },
  'leader-elect-retry-period': {
    kind: 'duration',
    group: 'Operations',
    aliases: ['retry-period'],
    default: '2s',
    describe: 'how often leader election and shard membership act',
  },
  'sources-memory-key-file': {
    kind: 'string',
    group: 'Operations',
    value: '<file>',
    describe:
      "a file holding a secret key (16 bytes or more, e.g. head -c 32 /dev/urandom | base64) that keys the hashes of each source's key set remembered on the sources' memory Lease, so that nothing there gives the keys away (the chart mounts one from a Secret); without it the memory keeps each source's key count only, and a restart into an outage is judged by count",
  },
} as const satisfies Record<string, Spec>;

export type Name = keyof typeof SPECS;

/** The commands besides the default (label); each takes the options above. */
export const COMMANDS = {
  status: "per kind: objects seen, carrying labeller's labels, that would change, in conflict; reads only (list)",
  prune: "remove every label labeller's field manager owns, and only those; then exit like --once",
  explain:
    'explain <kind>/<name> [-n ns]: why the object carries each key or not: rule, inputs, owners, state, next apply; reads only',
  admission:
    'print the config as MutatingAdmissionPolicies and their bindings, so that objects carry their labels from their create; says on stderr which rules stay with the controller; reads discovery only',
} as const;

export type Command = keyof typeof COMMANDS | 'label';

/** `labeller completion <shell>`, which src/cli.ts answers before anything else loads (completion.ts). */
export const COMPLETION = {
  name: 'completion',
  usage: 'completion <bash|zsh|fish>',
  describe: 'print a completion script for the shell, e.g. source <(labeller completion bash)',
} as const;

/** Examples shown by --help: the safe first command first. */
export const EXAMPLES: readonly (readonly [command: string, what: string])[] = [
  [
    'labeller --kinds deploy,svc --label team=platform -n default --once --dry-run',
    'show what would change in one namespace; write nothing',
  ],
  ['labeller --config kinds.yaml --once', 'converge once and exit (1 if anything failed)'],
  [
    'labeller --config kinds.yaml -l app.kubernetes.io/name --conflicts skip',
    "keep labels right on matching objects; leave other managers' labels",
  ],
  [
    'labeller --config kinds.yaml --leader-elect --metrics-bind-address :8080 --health-probe-bind-address :8081',
    'as in a cluster: one writer among replicas, probes and metrics',
  ],
  [
    "labeller status --config kinds.yaml -o json | jq -e '.total.pending == 0'",
    "a CI gate: fail when any object's labels would change",
  ],
  [
    'labeller admission --config kinds.yaml > admission.yaml',
    'the labels CEL can render, set at admission: policies to commit beside the controller',
  ],
  [
    'labeller prune --config kinds.yaml --dry-run',
    'show the labels an uninstall would remove; prune without --dry-run removes them',
  ],
  [
    'LABELLER_KINDS=cm LABELLER_LABEL=team=a LABELLER_NAMESPACE=shop labeller',
    'as a sidecar: configured by the environment',
  ],
  [
    'kubectl labeller status --config kinds.yaml',
    'the same commands as a kubectl plugin: the npm package installs kubectl-labeller too',
  ],
];

export const ENV_PREFIX = 'LABELLER_';

export function envName(name: string): string {
  return ENV_PREFIX + name.toUpperCase().replaceAll('-', '_');
}

/** The option's variable, then those of its former names. */
export function envNames(name: Name): string[] {
  const spec: Spec = SPECS[name];
  return [name, ...(spec.aliases ?? [])].map(envName);
}
