// The chaos harness's oracle: what every object's labels must be, from the harness's own record
// of the world (the config it wrote, the namespaces' labels, the source's content), written here
// and not taken from labeller's planner, so that it can disagree with it. The scenario's templates
// read only an object's namespace and a source, so the labels wanted are the same for every object
// of a namespace, whatever its kind.

/** The domain of the keys the scenario writes; other keys are not the oracle's business. */
export const DOMAIN = 'chaos.example.com';
export const KEYS = { static: `${DOMAIN}/static`, team: `${DOMAIN}/team`, cc: `${DOMAIN}/cost-center` } as const;

/** Which of the scenario's keys the config in force sets. */
export interface ConfigState {
  readonly static: boolean;
  readonly team: boolean;
  readonly cc: boolean;
}

/** The world as the harness made it. */
export interface WorldState {
  readonly config: ConfigState;
  /** Each namespace's `team` label (undefined: none). */
  readonly teams: ReadonlyMap<string, string | undefined>;
  /** The source's content labeller must be using: its last good one (see sourceVerdict). */
  readonly source: ReadonlyMap<string, string>;
  /** Objects (`kind/namespace/name`) whose team key another manager set while labeller did not want it: it stays theirs. */
  readonly intruded: ReadonlySet<string>;
}

/** The labels of the scenario's keys an object in `namespace` must carry. */
export function wanted(world: WorldState, namespace: string): Record<string, string> {
  const labels: Record<string, string> = {};
  const team = world.teams.get(namespace);
  if (world.config.static) labels[KEYS.static] = 'on';
  // A template whose variable has no value renders nothing: the key is not set, or removed.
  if (world.config.team && team !== undefined) labels[KEYS.team] = team;
  const cc = team === undefined ? undefined : world.source.get(team);
  if (world.config.cc && cc !== undefined) labels[KEYS.cc] = cc;
  return labels;
}

/** The labels of the scenario's keys object `key` (`kind/namespace/name`) must carry. */
export function expected(world: WorldState, key: string, intruder: string): Record<string, string> {
  const labels = wanted(world, key.split('/')[1]!);
  if (world.intruded.has(key) && !(KEYS.team in labels)) labels[KEYS.team] = intruder;
  return labels;
}

/** What a source document is, as the product must take it: a new good content, or refused. */
export type SourceVerdict = { readonly good: ReadonlyMap<string, string> } | { readonly refused: string };

/**
 * The source's content after `document` is written over `last` (the content in use): empty or
 * not a flat mapping is refused; so is a change that drops more than half of the keys, two or
 * more, at once (an outage that answers 200). Written from the documented rule, not the code.
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
  if (dropped >= 2 && dropped * 2 > last.size) return { refused: 'mass removal' };
  return { good: next };
}
