// `labeller explain <kind>/<name> [-n ns]`: why one object carries each key the config sets on it,
// or why not. Reads only, with the rights `status` needs (list), plus Events for the fights
// labeller reported. The object's kind runs as `status` runs it, limited to the object's
// namespace: its informer, related caches and sources, listed once, so the plan explained is the
// one the controller would act on and `status` counts.
import type { Config, KindConfig } from '../config/model.ts';
import type { SourceOrigin } from '../config/sources.ts';
import { relationName } from '../config/template.ts';
import { readFightNote } from '../events/labellerevents.ts';
import { expandEveryKind } from '../kinds/everykind.ts';
import { resolveKinds } from '../kinds/resolve.ts';
import { metadataApis } from '../kube/api.ts';
import { isForbidden } from '../apimachinery/errors.ts';
import { ResolveError } from '../apimachinery/resolve.ts';
import { type ApiResource, groupResource } from '../apimachinery/resource.ts';
import { explain, type Explanation, type KeyExplanation, type ReportedFight } from '../labelling/explain.ts';
import { type KeyOwner, keyOwners } from '../labelling/object.ts';
import type { Input } from '../labelling/trace.ts';
import { objectKey } from '../runtime/store.ts';
import { redactUrl } from '../util/url.ts';
import { UsageError } from '../util/usage.ts';
import type { Ending, Host } from './host.ts';

export interface ExplainOptions {
  /** `<kind>/<name>`. */
  readonly target: string;
  /** The object's namespace (-n); else the kubeconfig context's. */
  readonly namespace: string | undefined;
  readonly output: 'table' | 'json';
}

/** The document `labeller explain -o json` prints. */
export interface ExplainReport {
  readonly object: {
    readonly resource: string;
    readonly namespace?: string;
    readonly name: string;
    readonly uid?: string;
  };
  readonly fieldManager: string;
  /** The kinds entry that covers the object's kind. */
  readonly entry: string;
  /** Why labeller does not label this object at all (outside the entry's namespaces, not selected, being deleted). */
  readonly notLabelled?: string;
  readonly explanation?: Explanation;
  /** Where each source the object's templates read comes from: 'ConfigMap platform/catalog'. */
  readonly sources?: Readonly<Record<string, string>>;
  /** What could not be read (Events, for fights). */
  readonly notes: readonly string[];
}

export async function runExplain(host: Host, config: Config, options: ExplainOptions): Promise<Ending> {
  const { client, discovery, shutdown } = host;
  const [kindName = '', name = ''] = options.target.split('/');
  let resource: ApiResource;
  try {
    resource = discovery.resolve(kindName, ['list']);
  } catch (error) {
    if (error instanceof ResolveError) throw new UsageError(`labeller explain ${options.target}: ${error.message}`);
    throw error;
  }
  const namespace = resource.namespaced ? options.namespace ?? client.defaultNamespace ?? 'default' : '';
  const kind = entryFor(config, resource, host);
  const object = { resource: groupResource(resource), ...(namespace ? { namespace } : {}), name };
  const print = (report: ExplainReport): Ending => {
    process.stdout.write(options.output === 'json' ? `${JSON.stringify(report, null, 2)}\n` : table(report));
    return shutdown.intake.aborted ? 'incomplete' : 'done';
  };
  const base = { object, fieldManager: host.options.fieldManager, entry: kind.where, notes: [] };
  if (namespace && kind.namespaces.length > 0 && !kind.namespaces.includes(namespace)) {
    return print({ ...base, notLabelled: `${kind.where} watches namespaces ${kind.namespaces.join(', ')} only` });
  }

  // The object as the API server has it now, with managedFields: who owns each key.
  const { items } = await metadataApis(client)(resource, namespace).list({ fieldSelector: `metadata.name=${name}` });
  const found = items.find((item) => item.metadata.name === name);
  if (!found) throw new Error(`${groupResource(resource)} ${namespace ? `${namespace}/` : ''}${name} not found`);
  const { metadata } = found;
  const identified = { ...object, uid: metadata.uid };

  // Only the object's kind, and only its namespace, as the controller would see them.
  const narrowed: Config = {
    ...config,
    kinds: [{ ...kind, namespaces: namespace ? [namespace] : [] }],
    everyKind: undefined,
  };
  const started = await host.start(narrowed, { verbs: ['list'] });
  if (!started) return 'stopped';
  const labelled = started.kinds.kinds[0];
  if (!labelled) throw new Error(`${groupResource(resource)}: not served (see the log)`);
  await labelled.controller.ready();
  const cached = labelled.controller.get(objectKey({ name, namespace }));
  if (!cached || cached.deleting) {
    return print({
      ...base,
      object: identified,
      notLabelled: cached
        ? 'it is being deleted'
        : kind.selector
        ? `its labels do not match ${kind.where}'s selector "${kind.selector.toString()}"`
        : 'it is not in the list labeller reads (deleted meanwhile?)',
    });
  }
  const notes: string[] = [];
  const { plan, traces } = labelled.explain(cached);
  const fights = await reportedFights(host, namespace || 'default', metadata.uid, notes);
  const explanation = explain({
    traces,
    plan,
    values: { labels: metadata.labels ?? {}, annotations: metadata.annotations ?? {} },
    owners: {
      labels: keyOwners(metadata.managedFields, 'labels'),
      annotations: keyOwners(metadata.managedFields, 'annotations'),
    },
    admitted: cached.admitted,
    fieldManager: host.options.fieldManager,
    conflicts: kind.conflicts,
    fights,
    protect: kind.protect,
  });
  notes.push(...started.kinds.notes());
  const read = new Set(traces.flatMap((t) => t.inputs.flatMap((i) => (i.from === 'source' ? [i.source] : []))));
  const sources = Object.fromEntries(
    [...read].flatMap((source) => {
      const spec = config.sources.get(source);
      return spec ? [[source, originText(spec.origin)]] : [];
    }),
  );
  return print({ ...base, object: identified, explanation, sources, notes });
}

/** The config's entry for `resource`: one naming it, else the every-kind entry's share. */
function entryFor(config: Config, resource: ApiResource, host: Host): KindConfig {
  const name = groupResource(resource);
  const named = resolveKinds(config.kinds, host.discovery, config.references).resolved.find((k) =>
    groupResource(k.resource) === name
  );
  if (named) return named.kind;
  if (config.everyKind) {
    const expanded = expandEveryKind(config.everyKind, [], host.discovery.resources).kinds;
    const covered = expanded.find((k) => groupResource(k.resource) === name);
    if (covered) return covered.kind;
  }
  throw new UsageError(
    `labeller does not label ${name}: no kinds entry names it${
      config.everyKind ? ' and the "*" entry leaves it out' : ''
    }; add "- resource: ${resource.resource}" to the config's kinds`,
  );
}

function originText(origin: SourceOrigin): string {
  if (origin.type === 'configMap') {
    return `ConfigMap ${origin.namespace}/${origin.name}${origin.key === undefined ? '' : ` key ${origin.key}`}`;
  }
  return origin.type === 'file' ? `file ${origin.path}` : redactUrl(origin.url);
}

/** The fights labeller reported on the object (LabelFight Events) whose backoff has not ended. */
async function reportedFights(
  host: Host,
  namespace: string,
  uid: string,
  notes: string[],
): Promise<Map<string, ReportedFight>> {
  const fights = new Map<string, ReportedFight>();
  try {
    const { items } = await host.client.json<{ items: CoreEvent[] }>('GET', `/api/v1/namespaces/${namespace}/events`, {
      query: { fieldSelector: `involvedObject.uid=${uid},reason=LabelFight` },
    });
    for (const event of items) {
      const fight = readFightNote(event.message ?? event.note ?? '');
      const seen = Date.parse(event.series?.lastObservedTime ?? event.lastTimestamp ?? event.eventTime ?? '');
      if (!fight || Number.isNaN(seen) || seen + fight.backoffMs < Date.now()) continue;
      fights.set(`${fight.field}/${fight.key}`, { ...(fight.manager ? { manager: fight.manager } : {}), atMs: seen });
    }
  } catch (error) {
    if (!isForbidden(error)) throw error;
    notes.push(`cannot list Events in ${namespace} (403): fights labeller reported are not shown`);
  }
  return fights;
}

/** A core/v1 Event, the fields read here. */
interface CoreEvent {
  readonly message?: string;
  readonly note?: string;
  readonly lastTimestamp?: string;
  readonly eventTime?: string;
  readonly series?: { readonly lastObservedTime?: string };
}

/** A summary table of the keys, then each key's rule, template and inputs. */
function table(report: ExplainReport): string {
  const { object } = report;
  const lines = [
    `${object.resource} ${object.namespace ? `${object.namespace}/` : ''}${object.name}` +
    `${object.uid ? ` (uid ${object.uid})` : ''}, field manager ${report.fieldManager}, entry ${report.entry}`,
  ];
  if (report.notLabelled) lines.push(`not labelled: ${report.notLabelled}`);
  const explanation = report.explanation;
  if (explanation) {
    if (explanation.problem) lines.push(`nothing can be written: ${explanation.problem}`);
    const head = ['KEY', 'DESIRED', 'ON OBJECT', 'OWNERS', 'STATE', 'NEXT APPLY'];
    const rows = [
      ...explanation.keys.map((k) => [
        keyName(k.field, k.key),
        k.desired ?? '-',
        k.value ?? '-',
        owners(k.owners),
        k.state,
        k.next,
      ]),
      ...explanation.stale.map((
        k,
      ) => [keyName(k.field, k.key), '-', k.value ?? '-', owners(k.owners), 'stale', k.next]),
    ];
    lines.push('', ...columns(head, rows));
    for (const key of explanation.keys) lines.push('', ...details(key, report.sources ?? {}));
    if (explanation.stale.length > 0) {
      lines.push(
        '',
        'stale: keys labeller owns that the config no longer wants on this object; the next apply lets them go',
      );
    }
    lines.push('', `next apply: ${explanation.pending ? 'changes the object' : 'nothing to do'}`);
  }
  for (const note of report.notes) lines.push(`note: ${note}`);
  return `${lines.join('\n')}\n`;
}

function details(key: KeyExplanation, sources: Readonly<Record<string, string>>): string[] {
  return [
    keyName(key.field, key.key),
    `  rule      ${key.rule}`,
    `  template  ${key.template}`,
    ...key.inputs.map((input, i) => `  ${i === 0 ? 'read    ' : '        '}  ${inputText(input, sources)}`),
    ...(key.why ? [`  ${key.state.padEnd(8)}  ${key.why}`] : []),
    ...(key.protection
      ? [
        `  protect   ${key.protection}: the API server ${
          { deny: 'refuses', warn: 'warns of', audit: 'audits' }[key.protection]
        } any change of it by another identity than labeller's (and the config's protect.allow)`,
      ]
      : []),
  ];
}

function inputText(input: Input, sources: Readonly<Record<string, string>>): string {
  const value = input.value === undefined ? '(absent)' : JSON.stringify(input.value);
  if (input.from === 'object') return `the object's ${input.map}.${input.key} = ${value}`;
  if (input.from === 'field') return `the object's ${input.path} = ${value}`;
  if (input.from === 'source') {
    const origin = sources[input.source];
    return `source ${input.source}${origin ? ` (${origin})` : ''}: entry ${JSON.stringify(input.key)}${
      input.field ? ` field ${input.field}` : ''
    } = ${value}`;
  }
  const relation = relationName(input.from);
  if (!input.object) return `${relation}: none`;
  const { via } = input;
  const named = !via
    ? input.object.name
    : via.reverse
    ? `${via.value} (whose ${via.path} names the object)`
    : `${input.object.name} (named by the object's ${via.path})`;
  return `${relation} ${input.object.kind} ${named}: ${input.read} = ${value}`;
}

const keyName = (field: 'labels' | 'annotations', key: string) => (field === 'labels' ? key : `${key} (annotation)`);

const owners = (list: readonly KeyOwner[]) =>
  list.length === 0
    ? '-'
    : list.map((o) => (o.operation === 'Apply' ? o.manager : `${o.manager} (${o.operation})`)).join(',');

function columns(head: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  return [head, ...rows].map((cells) => cells.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd());
}
