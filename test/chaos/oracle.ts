// The chaos harness's oracle: what every object's labels must be, from the harness's own record
// of the world (the config it wrote, the namespaces' labels, the two sources' contents), written here
// and not taken from labeller's planner, so that it can disagree with it. The scenario's templates
// read an object's namespace and the sources, so the labels wanted are the same for every object
// of a namespace, whatever its kind; and pods read their node's zone by reference (`node.*`), so a
// pod's zone key is its node's zone label, as the harness set it. With --admission-policies it also says what an object
// carries in its create response (atCreate), from the documented rules of what a policy sets,
// not from labeller's renderer.

/** The domain of the keys the scenario writes; other keys are not the oracle's business. */
export const DOMAIN = 'chaos.example.com';
export const KEYS = {
  static: `${DOMAIN}/static`,
  team: `${DOMAIN}/team`,
  cc: `${DOMAIN}/cost-center`,
  site: `${DOMAIN}/site`,
  /** Pods only: their node's NODE_ZONE label. */
  zone: `${DOMAIN}/zone`,
} as const;

/** The label the harness sets on the nodes, which pods read by reference. */
export const NODE_ZONE = `${DOMAIN}/node-zone`;

/** The HTTPS source's size limit (its `maxBytes`): a larger body is refused. */
export const CATALOG_MAX_BYTES = 4096;

/** Which of the scenario's keys the config in force sets. */
export interface ConfigState {
  readonly static: boolean;
  readonly team: boolean;
  readonly cc: boolean;
  /** The key read from the HTTPS source. */
  readonly site: boolean;
}

/** The world as the harness made it. */
export interface WorldState {
  readonly config: ConfigState;
  /** Each namespace's `team` label (undefined: none). */
  readonly teams: ReadonlyMap<string, string | undefined>;
  /** The source's content labeller must be using: its last good one (see sourceVerdict). */
  readonly source: ReadonlyMap<string, string>;
  /** The HTTPS source's content labeller must be using, likewise. */
  readonly catalog: ReadonlyMap<string, string>;
  /**
   * Sources that a process started while they answered a refused document (an outage) has never
   * read: their keys are held, neither set nor removed, until a good document comes (memory.ts).
   */
  readonly held: ReadonlyMap<HeldSource, HeldValues>;
  /** Objects (`kind/namespace/name`) whose team key another manager set while labeller did not want it: it stays theirs. */
  readonly intruded: ReadonlySet<string>;
  /**
   * Objects whose team key another manager set while labeller wanted it, and that labeller
   * stopped wanting within the grace: taken back first (then removed), or not (it stays theirs).
   */
  readonly racing: ReadonlySet<string>;
  /** Each node's NODE_ZONE label (undefined: none). */
  readonly zones: ReadonlyMap<string, string | undefined>;
}

/** The sources a key reads. */
export type HeldSource = 'cc' | 'site';
/**
 * A held source's key on each object (`kind/namespace/name`) when the hold began (undefined: it
 * had none), and each value the last good content gave it in each namespace since: a process
 * that read that content may have written one before the namespace went to a process that
 * holds the key where it finds it (a new leader, or the shard member that takes the namespace).
 */
export interface HeldValues {
  readonly objects: ReadonlyMap<string, string | undefined>;
  readonly since: ReadonlyMap<string, ReadonlySet<string | undefined>>;
}

/** The values each key may have (undefined: absent); a key not named must be absent. */
export type Expectation = Readonly<Record<string, readonly (string | undefined)[]>>;

export function matches(labels: Readonly<Record<string, string>>, expectation: Expectation): boolean {
  const keys = new Set([...Object.keys(labels), ...Object.keys(expectation)]);
  return [...keys].every((key) => (expectation[key] ?? [undefined]).includes(labels[key]));
}

/** The labels of the scenario's keys an object in `namespace` must carry. */
export function wanted(world: WorldState, namespace: string): Record<string, string> {
  const labels: Record<string, string> = {};
  const team = world.teams.get(namespace);
  if (world.config.static) labels[KEYS.static] = 'on';
  // A template whose variable has no value renders nothing: the key is not set, or removed.
  if (world.config.team && team !== undefined) labels[KEYS.team] = team;
  // A held source's key as its last good content says: a leader that read it may remove the key
  // (expected() admits the other leader, which keeps it).
  const cc = team === undefined ? undefined : world.source.get(team);
  if (world.config.cc && cc !== undefined) labels[KEYS.cc] = cc;
  const site = team === undefined ? undefined : world.catalog.get(team);
  if (world.config.site && site !== undefined) labels[KEYS.site] = site;
  return labels;
}

/**
 * The labels an object created in `namespace` with none of the scenario's keys carries in its
 * create response while the admission policies of the config in force are enforced: the keys
 * rendered from constants and the namespace's labels, as wanted. The sources' keys are left to
 * the controller (docs/operations.md): the ConfigMap source is read through `key:`, a document
 * CEL cannot parse, and the other is a URL.
 */
export function atCreate(world: WorldState, namespace: string): Record<string, string> {
  const labels = wanted(world, namespace);
  return Object.fromEntries([KEYS.static, KEYS.team].flatMap((key) => key in labels ? [[key, labels[key]!]] : []));
}

/**
 * What object `key` (`kind/namespace/name`, on `node` for a pod) must carry of the scenario's keys. A held source's key
 * is either as it was when the hold began (a process started into the outage keeps it), as the
 * last good content says (a process that read that content before the outage, still running),
 * or as that content said at some moment since (written by the latter, then held by the former),
 * whether or not the namespace has a team now.
 */
export function expected(world: WorldState, key: string, intruder: string, node?: string): Expectation {
  const ns = key.split('/')[1]!;
  const labels = wanted(world, ns);
  // A pod on a node with a zone carries it; one not scheduled, or on a node without one, does not.
  const zone = key.startsWith('pods/') && node !== undefined ? world.zones.get(node) : undefined;
  if (zone !== undefined) labels[KEYS.zone] = zone;
  const expectation: Record<string, (string | undefined)[]> = {};
  for (const [label, value] of Object.entries(labels)) expectation[label] = [value];
  for (const [source, values] of world.held) {
    const label = KEYS[source];
    // A namespace without a team too: a source that has not loaded holds the key whatever the
    // lookup's key would be (src/labelling/reconcile.ts), and one that has removes it.
    if (!world.config[source]) continue;
    expectation[label] = [...new Set([values.objects.get(key), ...(values.since.get(ns) ?? []), labels[label]])];
  }
  if (world.intruded.has(key) && !(KEYS.team in labels)) expectation[KEYS.team] = [intruder];
  else if (world.racing.has(key) && !(KEYS.team in labels)) expectation[KEYS.team] = [intruder, undefined];
  return expectation;
}

/**
 * What a source document is, as the product must take it: a new good content, or refused; a
 * refused one that is smaller (`shrunk`) is taken once it has stayed the same for the source's
 * acceptSmallerAfter, every read in between succeeding.
 */
export type SourceVerdict =
  | { readonly good: ReadonlyMap<string, string> }
  | { readonly refused: string; readonly shrunk?: ReadonlyMap<string, string> };

/**
 * The source's content after `document` is written over `last` (the content in use): empty or
 * not a flat mapping is refused; so is a change that drops more than half of the keys, two or
 * more, at once (an outage that answers 200), until it has stayed so. Written from the
 * documented rule, not the code.
 */
export function sourceVerdict(last: ReadonlyMap<string, string>, document: unknown): SourceVerdict {
  if (document === null || document === undefined) return { refused: 'empty' };
  if (typeof document !== 'object' || Array.isArray(document)) return { refused: 'not a mapping' };
  const next = new Map<string, string>();
  for (const [key, value] of Object.entries(document)) {
    if (typeof value !== 'string') return { refused: 'not flat' };
    next.set(key, value);
  }
  if (next.size === 0) return { refused: 'no entries' };
  const dropped = [...last.keys()].filter((key) => !next.has(key)).length;
  if (dropped >= 2 && dropped * 2 > last.size) return { refused: 'mass removal', shrunk: next };
  return { good: next };
}

/** The HTTPS source's content after `body` is served over `last`: too large is refused, else as sourceVerdict. */
export function catalogVerdict(last: ReadonlyMap<string, string>, body: string): SourceVerdict {
  if (Buffer.byteLength(body) > CATALOG_MAX_BYTES) return { refused: 'too large' };
  let document: unknown;
  try {
    document = JSON.parse(body);
  } catch {
    return { refused: 'not JSON' };
  }
  return sourceVerdict(last, document);
}
