// kubeconfig files read as kubectl reads them: $KUBECONFIG's files merged (the first to define a
// name or the current context wins; missing files skipped), else ~/.kube/config; relative paths
// resolved against the file that names them. Only the selected context's cluster and user are
// returned; credentials.ts turns them into credentials.
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, dirname, isAbsolute, join, resolve } from 'node:path';
import { load } from 'js-yaml';
import { KubeConfigError } from '../../apimachinery/errors.ts';

export interface KubeconfigCluster {
  readonly server: string;
  readonly 'certificate-authority'?: string;
  readonly 'certificate-authority-data'?: string;
  readonly 'insecure-skip-tls-verify'?: boolean;
  readonly 'tls-server-name'?: string;
  readonly 'proxy-url'?: string;
}

/** `users[].user`: the fields labeller reads itself (auth-provider goes to client-node). */
export interface KubeconfigUser {
  readonly token?: string;
  readonly tokenFile?: string;
  readonly 'client-certificate'?: string;
  readonly 'client-certificate-data'?: string;
  readonly 'client-key'?: string;
  readonly 'client-key-data'?: string;
  readonly username?: string;
  readonly password?: string;
  readonly exec?: {
    readonly command: string;
    readonly args?: string[];
    readonly env?: { name: string; value: string }[];
    readonly apiVersion?: string;
    readonly installHint?: string;
    readonly provideClusterInfo?: boolean;
    readonly interactiveMode?: string;
  };
  readonly 'auth-provider'?: unknown;
  readonly as?: string;
  readonly 'as-groups'?: string[];
}

export interface KubeconfigSelection {
  /** The files read, for messages. */
  readonly files: readonly string[];
  readonly context: string;
  readonly namespace: string | undefined;
  readonly cluster: KubeconfigCluster;
  readonly user: KubeconfigUser;
}

/**
 * The kubeconfig files to read: `explicit` (--kubeconfig), else $KUBECONFIG's list, else
 * ~/.kube/config if it exists; undefined when there is none (then in-cluster config is next).
 */
export function kubeconfigFiles(explicit: string | undefined, env: NodeJS.ProcessEnv): readonly string[] | undefined {
  if (explicit) return [explicit];
  const list = (env['KUBECONFIG'] ?? '').split(delimiter).filter(Boolean);
  if (list.length > 0) return list;
  const home = env['HOME'] ?? homedir();
  const file = join(home, '.kube', 'config');
  return existsSync(file) ? [file] : undefined;
}

interface Named<K extends string, T> {
  readonly name: string;
  readonly value: T;
  readonly kind: K;
}

interface ContextEntry {
  readonly cluster?: string;
  readonly user?: string;
  readonly namespace?: string;
}

/** Reads and merges `files`, then selects `context` (default: the current context). */
export function loadKubeconfig(files: readonly string[], context: string | undefined): KubeconfigSelection {
  const clusters = new Map<string, KubeconfigCluster>();
  const users = new Map<string, KubeconfigUser>();
  const contexts = new Map<string, ContextEntry>();
  let current: string | undefined;
  const explicit = files.length === 1;
  let read = 0;
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (error) {
      // kubectl skips missing files of a $KUBECONFIG list; a file named on its own must exist.
      if (!explicit && (error as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw kubeconfigError(file, error instanceof Error ? error.message : String(error));
    }
    read++;
    const parsed = parse(file, text);
    for (const entry of parsed.entries) {
      const target = entry.kind === 'cluster' ? clusters : entry.kind === 'user' ? users : contexts;
      if (!target.has(entry.name)) (target as Map<string, unknown>).set(entry.name, entry.value);
    }
    current ??= parsed.current;
  }
  if (read === 0) throw kubeconfigError(files.join(delimiter), 'none of these files exists');

  const name = context ?? current;
  if (name !== undefined && !contexts.has(name)) {
    const known = [...contexts.keys()].join(', ') || 'none';
    throw new KubeConfigError(
      `${
        context === undefined ? 'current-context' : 'context'
      } "${name}" is not in the kubeconfig (contexts: ${known}). Pass one of them with --context`,
    );
  }
  const selected = name === undefined ? undefined : contexts.get(name);
  if (name === undefined || !selected) {
    throw new KubeConfigError(
      'no cluster configured: the kubeconfig has no current context. Pass --kubeconfig and --context, or run inside a cluster',
    );
  }
  const cluster = selected.cluster === undefined ? undefined : clusters.get(selected.cluster);
  if (!cluster) {
    throw new KubeConfigError(
      `context "${name}" names cluster "${
        selected.cluster ?? ''
      }", which the kubeconfig does not define. Fix the kubeconfig or pick another --context`,
    );
  }
  const user = selected.user === undefined || selected.user === '' ? {} : users.get(selected.user);
  if (!user) {
    throw new KubeConfigError(
      `context "${name}" names user "${
        selected.user ?? ''
      }", which the kubeconfig does not define. Fix the kubeconfig or pick another --context`,
    );
  }
  return { files, context: name, namespace: selected.namespace || undefined, cluster, user };
}

function kubeconfigError(file: string, problem: string): KubeConfigError {
  return new KubeConfigError(`cannot load kubeconfig ${file}: ${problem}. Pass --kubeconfig with a valid file`);
}

function document(file: string, text: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = load(text);
  } catch (error) {
    throw kubeconfigError(file, error instanceof Error ? error.message.split('\n')[0] ?? '' : String(error));
  }
  if (parsed === null || parsed === undefined) return {};
  if (typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw kubeconfigError(file, 'it is not a kubeconfig (a YAML mapping)');
  }
  return parsed as Record<string, unknown>;
}

type Entry = Named<'cluster' | 'user' | 'context', KubeconfigCluster | KubeconfigUser | ContextEntry>;

function parse(file: string, text: string): { entries: Entry[]; current: string | undefined } {
  const doc = document(file, text);
  const dir = dirname(resolve(file));
  const entries: Entry[] = [];
  const section = <K extends 'cluster' | 'user' | 'context'>(
    list: string,
    kind: K,
    fix: (value: Record<string, unknown>, where: string) => Record<string, unknown>,
  ): void => {
    const items = doc[list] ?? [];
    if (!Array.isArray(items)) throw kubeconfigError(file, `${list} is not a list`);
    items.forEach((item: unknown, i) => {
      const where = `${list}[${i}]`;
      if (!item || typeof item !== 'object') throw kubeconfigError(file, `${where} is not a mapping`);
      const { name, [kind]: value } = item as Record<string, unknown>;
      if (typeof name !== 'string' || !name) throw kubeconfigError(file, `${where}.name is missing`);
      if (value !== undefined && (value === null || typeof value !== 'object')) {
        throw kubeconfigError(file, `${where}.${kind} is not a mapping`);
      }
      entries.push({
        kind,
        name,
        value: fix({ ...(value as Record<string, unknown> | undefined) }, `${where}.${kind}`) as never,
      });
    });
  };
  const absolute = (value: Record<string, unknown>, field: string): void => {
    const path = value[field];
    if (typeof path === 'string' && path && !isAbsolute(path)) value[field] = join(dir, path);
  };
  section('clusters', 'cluster', (cluster, where) => {
    if (typeof cluster['server'] !== 'string' || !cluster['server']) {
      throw kubeconfigError(file, `${where}.server is missing`);
    }
    absolute(cluster, 'certificate-authority');
    return cluster;
  });
  section('users', 'user', (user) => {
    for (const field of ['client-certificate', 'client-key', 'tokenFile']) absolute(user, field);
    // client-go: a plugin command given as a relative path with a slash is relative to the file.
    const exec = user['exec'] as Record<string, unknown> | undefined;
    if (exec && typeof exec['command'] === 'string' && exec['command'].includes('/')) {
      user['exec'] = { ...exec, command: isAbsolute(exec['command']) ? exec['command'] : join(dir, exec['command']) };
    }
    return user;
  });
  section('contexts', 'context', (context) => context);
  const current = doc['current-context'];
  return { entries, current: typeof current === 'string' && current ? current : undefined };
}
