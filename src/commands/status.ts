// `labeller status`: what labeller owns and what it would change, per kind, from one
// metadata-only list of each kind and of each related kind its templates read (the same kinds,
// caches and templates the controller runs, listed once): no write, no dry-run apply, so `list`
// is the only right it needs (a CI job or an auditor with read access can run it). Its counts are
// what the running controller would patch.
import type { Config } from '../config/model.ts';
import { watchedNamespaces } from '../kinds/resolve.ts';
import { groupResource } from '../kube/resource.ts';
import { noObjects, type ObjectCounts } from '../labelling/counts.ts';
import type { Ending, Host } from './host.ts';

export interface KindStatus extends ObjectCounts {
  readonly kind: string;
  /** As RBAC names it: `deployments.apps`. */
  readonly resource: string;
  /** Empty: every namespace (or cluster-scoped). */
  readonly namespaces: readonly string[];
  /** Why this kind could not be counted (not served, list failed); its counts are then 0. */
  readonly error?: string;
}

/** The document `labeller status -o json` prints. */
export interface StatusReport {
  readonly fieldManager: string;
  readonly kinds: readonly KindStatus[];
  readonly total: ObjectCounts;
}

export interface StatusOptions {
  readonly output: 'table' | 'json';
}

/** Prints the report on stdout; `incomplete` when a kind could not be counted or a signal cut it short. */
export async function runStatus(host: Host, config: Config, options: StatusOptions): Promise<Ending> {
  // `list` is the only right status needs.
  const started = await host.start(config, { verbs: ['list'] });
  if (!started) return 'stopped';
  const { kinds } = started;
  const { log, shutdown } = host;
  const counted = await Promise.all(
    kinds.kinds.map(async ({ resolved: { kind, resource }, controller, count }): Promise<KindStatus> => {
      const row = {
        kind: resource.kind,
        resource: groupResource(resource),
        namespaces: watchedNamespaces(kind, resource).filter(Boolean),
      };
      try {
        await controller.ready();
        return { ...row, ...count() };
      } catch (error) {
        log.error('cannot list; kind not counted', { kind: row.resource, error });
        return { ...row, ...noObjects(), error: error instanceof Error ? error.message : String(error) };
      }
    }),
  );
  const notServed = kinds.unknown.map(({ kind, error }): KindStatus => ({
    kind: kind.resource,
    resource: kind.resource,
    namespaces: kind.namespaces,
    ...noObjects(),
    error: error.message,
  }));
  const rows = [...counted, ...notServed];
  const total = noObjects();
  for (const row of rows) for (const field of COLUMNS) total[field] += row[field];
  const report: StatusReport = { fieldManager: host.options.fieldManager, kinds: rows, total };
  process.stdout.write(options.output === 'json' ? `${JSON.stringify(report, null, 2)}\n` : table(report));
  return rows.some((row) => row.error !== undefined) || shutdown.intake.aborted ? 'incomplete' : 'done';
}

const COLUMNS = [
  'seen',
  'managed',
  'pending',
  'conflicts',
  'invalid',
  'held',
] as const satisfies readonly (keyof ObjectCounts)[];

/** kubectl-style columns: names left, counts right, errors after them. */
function table(report: StatusReport): string {
  const head = ['KIND', 'NAMESPACES', ...COLUMNS.map((c) => c.toUpperCase())];
  const lines = [
    ...report.kinds.map((
      row,
    ) => [
      row.resource,
      row.namespaces.join(',') || '*',
      ...COLUMNS.map((c) => String(row[c])),
      row.error ? `error: ${row.error}` : '',
    ]),
    ['total', '', ...COLUMNS.map((c) => String(report.total[c])), ''],
  ];
  const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const format = (cells: readonly string[]) =>
    cells.map((cell, i) => (i >= head.length ? cell : i < 2 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)))
      .join('  ').trimEnd();
  return `${[head, ...lines].map(format).join('\n')}\n`;
}
