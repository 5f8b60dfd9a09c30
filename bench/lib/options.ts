// bench/run.ts's command line: its options, their defaults (--quick's for CI), and the usage text.
// A mode of its own (--related, …) is one flag here, one field of Options and one branch in run.ts.
import { parseArgs } from 'node:util';
import { exitWithUsage } from './cli.ts';
import { type Launch, launch, LAUNCH_OPTIONS, LAUNCH_USAGE } from './launch.ts';
import { KINDS, type KindSpec } from './objects.ts';
import { type ContenderId, CONTENDERS } from './peercommands.ts';

export const USAGE = `usage: bench/run.ts [options]
  --quick                 N = 300, idle 0.5 min, 50 latency samples (CI; a few minutes)
  --n N                   objects, split over the kinds (1k, 10k, 50k; default 10k)
  --kinds K               the kinds labelled, of configmaps,services,deployments (default all three;
                          configmaps alone is the issue's side-by-side with the Go and Rust controllers)
  --idle-minutes M        idle window (default 2; the target is about 10)
  --samples S             relabel latency samples, idle and under churn each (default 200)
  --concurrency C         labeller's --concurrency per kind (default 8); the tight loop uses C × kinds
  --create-concurrency C  requests in flight while creating objects (default 50)
  --churn-rate R          background writes per second during the churn latency samples (default 20)
${LAUNCH_USAGE}
                          (the memory probes run on labeller’s runtime)
  --credentials C         how labeller authenticates: kubeconfig (a bearer token, default) or in-cluster
                          (the same token as a pod's service-account mount, KUBERNETES_SERVICE_*, no kubeconfig)
  --cold-only             stop after cold convergence and the tight loop (for iterating on CPU and memory)
  --memory-only           only the memory per cached object (row 4), right after creating the objects
  --related               only the rows of labels from related objects (bench/lib/related.ts)
  --sources               only the rows of labels from a source of truth (bench/lib/sources.ts)
  --workloads             only the rows of real shapes: N pods (default 1000) of Deployments on a full
                          control plane, labelled from root.*/owner.*, then a rolling restart (bench/lib/workloads.ts)
  --every-kind            only rows E1–E5: labeller in every-kind mode (resource "*", scope all, cluster-wide)
                          at rest, then over --n objects of each of 10 kinds (default 1000; --quick 30):
                          RSS, CPU, watches open, requests idle (bench/lib/everykind.ts)
  --peers                 labeller side by side with the labellers of bench/peers/ (kube-rs, controller-runtime,
                          @kubernetes/client-node) and the tight loop: N ConfigMaps each, one label, --concurrency
                          in flight; labeller as the image runs dist/ and as installed from \`npm run package\`
                          (bench/lib/peers.ts; takes no --kinds, --credentials, --*-only or labeller options)
  --without NAME[,NAME]   --peers: leave contenders out (${CONTENDERS.join(', ')}), e.g. client-node at 100k
  --lists                 only labeller's first list of N ConfigMaps (default 50k), as a streaming list and as
                          paginated lists, alternating, --rounds times: its time, CPU and peak RSS, and the API
                          server's CPU, allocation and RSS growth, etcd's CPU (bench/lib/lists.ts)
  --rounds R              --lists: runs of each kind of list (default 3); --references: batches of its two runs,
                          alternating which goes first (default 2); --peers: batches, every other one in reverse
                          order (default 2; --quick 1)
  --shards                only rows SH1–SH5: replicas with --shards auto against one, N ConfigMaps (default 100k;
                          --quick 3k) over N/100 namespaces, cluster-wide: one member, then three (time, CPU, peak
                          RSS, bytes received), one killed, members joining and leaving; then three again on a
                          second control plane with the ShardedListAndWatch gate off (bench/lib/shards.ts)
  --sequential-names      --shards: namespaces named shards-bench-NNNN, the counter last (crowded in a few equal buckets)
  --admission             only rows AD1–AD4: labels at create with --admission-policies, on a full control plane:
                          batches of N ConfigMaps (default 10k; --quick 300) created with and without the policies
                          (labels in the create response, PATCHes, create latency, the API server's admission
                          metrics), --samples created one at a time (create → label by the controller), existing
                          objects converged, and N/10 pods of Deployments rolled out (bench/lib/admission.ts)
  --references            only rows RF1–RF4: N pods (default 10k; --quick 300) placed by spec.nodeName on N/100 kwok
                          nodes (10 at least) with zone labels, on a full control plane; labelled from their node
                          ({{node.labels.topology.kubernetes.io/zone}}) against from their metadata ({{namespace}}):
                          time, CPU, peak RSS, PATCHes; then a node's zone changed: exactly its pods PATCHed, once
                          each (bench/lib/references.ts)
  --scrape                only rows M1–M3: what a /metrics scrape costs over N ConfigMaps (default 100k; --quick
                          300): the first, while converging, converged, while a namespace label relabels them all;
                          then in every-kind mode over the control plane's kinds; /healthz asked every 10 ms
                          meanwhile for event-loop stalls (bench/lib/scrape.ts)
  --no-memory             skip the memory measurements
  --no-results-md         do not update bench/RESULTS.md`;

export type Credentials = 'kubeconfig' | 'in-cluster';

export interface Options extends Launch {
  readonly quick: boolean;
  readonly n: number;
  readonly idleMinutes: number;
  readonly samples: number;
  readonly concurrency: number;
  /** The kinds labelled (not for --related, which labels all three). */
  readonly kinds: readonly KindSpec[];
  readonly createConcurrency: number;
  readonly churnRate: number;
  readonly memory: boolean;
  readonly resultsMd: boolean;
  readonly related: boolean;
  readonly workloads: boolean;
  readonly sources: boolean;
  readonly everyKind: boolean;
  readonly peers: boolean;
  readonly without: readonly ContenderId[];
  readonly lists: boolean;
  readonly rounds: number;
  readonly shards: boolean;
  readonly sequentialNames: boolean;
  readonly admission: boolean;
  readonly scrape: boolean;
  readonly references: boolean;
  readonly coldOnly: boolean;
  readonly credentials: Credentials;
  readonly memoryOnly: boolean;
}

function parseCount(text: string, flag: string): number {
  const m = /^(\d+(?:\.\d+)?)(k?)$/i.exec(text.trim());
  const n = m ? Math.round(Number(m[1]) * (m[2] ? 1000 : 1)) : NaN;
  if (!Number.isInteger(n) || n < 3) throw new Error(`${flag} ${text}: expected a whole number ≥ 3, e.g. 1k, 10k, 50k`);
  return n;
}

function parsePositive(text: string, flag: string): number {
  const n = Number(text);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${flag} ${text}: expected a positive number`);
  return n;
}

/** The options of `argv`; --help prints USAGE and exits. Throws on a bad option. */
export function options(argv: string[]): Options {
  const { values, tokens } = parseArgs({
    args: argv,
    strict: true,
    tokens: true,
    options: {
      quick: { type: 'boolean', default: false },
      n: { type: 'string' },
      'idle-minutes': { type: 'string' },
      samples: { type: 'string' },
      concurrency: { type: 'string', default: '8' },
      kinds: { type: 'string', default: KINDS.map((k) => k.resource).join(',') },
      'create-concurrency': { type: 'string', default: '50' },
      'churn-rate': { type: 'string', default: '20' },
      ...LAUNCH_OPTIONS,
      'no-memory': { type: 'boolean', default: false },
      related: { type: 'boolean', default: false },
      workloads: { type: 'boolean', default: false },
      sources: { type: 'boolean', default: false },
      'every-kind': { type: 'boolean', default: false },
      peers: { type: 'boolean', default: false },
      without: { type: 'string', default: '' },
      lists: { type: 'boolean', default: false },
      rounds: { type: 'string' },
      shards: { type: 'boolean', default: false },
      'sequential-names': { type: 'boolean', default: false },
      admission: { type: 'boolean', default: false },
      scrape: { type: 'boolean', default: false },
      references: { type: 'boolean', default: false },
      'no-results-md': { type: 'boolean', default: false },
      'cold-only': { type: 'boolean', default: false },
      credentials: { type: 'string', default: 'kubeconfig' },
      'memory-only': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) exitWithUsage(USAGE);
  const quick = values.quick;
  const credentials = values.credentials;
  if (credentials !== 'kubeconfig' && credentials !== 'in-cluster') {
    throw new Error(`--credentials ${credentials}: expected kubeconfig or in-cluster`);
  }
  const kinds = values.kinds.split(',').map((resource) => {
    const kind = KINDS.find((k) => k.resource === resource.trim());
    if (!kind) throw new Error(`--kinds ${values.kinds}: expected some of ${KINDS.map((k) => k.resource).join(', ')}`);
    return kind;
  });
  if ((values.related || values.sources) && kinds.length < KINDS.length) {
    throw new Error('--related and --sources label all three kinds; drop --kinds');
  }
  if (values.without && !values.peers) throw new Error('--without leaves contenders of --peers out; add --peers');
  if (values.peers) {
    const given = new Set<string>(tokens.flatMap((t) => (t.kind === 'option' ? [t.name] : [])));
    const other = ['related', 'kinds', 'credentials', 'cold-only', 'memory-only', ...Object.keys(LAUNCH_OPTIONS)].find((
      name,
    ) => given.has(name));
    if (other !== undefined) {
      throw new Error(`--peers labels ConfigMaps and runs labeller as the image and the package do; drop --${other}`);
    }
  }
  if (values['sequential-names'] && !values.shards) {
    throw new Error('--sequential-names names the namespaces of --shards');
  }
  for (const mode of ['shards', 'admission', 'scrape', 'references'] as const) {
    if (!values[mode]) continue;
    const given = new Set<string>(tokens.flatMap((t) => (t.kind === 'option' ? [t.name] : [])));
    const other = ['kinds', 'credentials', 'cold-only', 'memory-only'].find((name) => given.has(name));
    if (other !== undefined) {
      throw new Error(
        `--${mode} labels ${mode === 'references' ? 'pods' : 'ConfigMaps'} with a kubeconfig; drop --${other}`,
      );
    }
  }
  return {
    ...launch(values),
    quick,
    kinds: values.peers || values.lists || values.shards || values.admission || values.scrape
      ? KINDS.filter((k) => k.resource === 'configmaps')
      : kinds,
    n: values.n
      ? parseCount(values.n, '--n')
      : values['every-kind']
      ? (quick ? 30 : 1000)
      : values.shards
      ? (quick ? 3000 : 100_000)
      : values.scrape && !quick
      ? 100_000
      : quick
      ? 300
      : values.workloads
      ? 1000
      : values.lists
      ? 50_000
      : 10_000,
    idleMinutes: values['idle-minutes'] ? parsePositive(values['idle-minutes'], '--idle-minutes') : quick ? 0.5 : 2,
    samples: values.samples ? Math.round(parsePositive(values.samples, '--samples')) : quick ? 50 : 200,
    concurrency: Math.round(parsePositive(values.concurrency, '--concurrency')),
    createConcurrency: Math.round(parsePositive(values['create-concurrency'], '--create-concurrency')),
    churnRate: parsePositive(values['churn-rate'], '--churn-rate'),
    memory: !values['no-memory'],
    resultsMd: !values['no-results-md'],
    related: values.related,
    workloads: values.workloads,
    sources: values.sources,
    everyKind: values['every-kind'],
    peers: values.peers,
    without: contendersLeftOut(values.without),
    lists: values.lists,
    rounds: values.rounds
      ? Math.round(parsePositive(values.rounds, '--rounds'))
      : values.references
      ? 2
      : values.peers
      ? quick ? 1 : 2
      : 3,
    shards: values.shards,
    sequentialNames: values['sequential-names'],
    admission: values.admission,
    scrape: values.scrape,
    references: values.references,
    coldOnly: values['cold-only'],
    credentials,
    memoryOnly: values['memory-only'],
  };
}

function contendersLeftOut(names: string): ContenderId[] {
  return names.split(',').filter((n) => n !== '').map((name) => {
    const id = CONTENDERS.find((c) => c === name);
    if (id === undefined) throw new Error(`--without ${name}: expected some of ${CONTENDERS.join(', ')}`);
    return id;
  });
}
