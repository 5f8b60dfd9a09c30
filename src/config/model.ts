// The config in force, as every other part reads it: the kinds (each with its effective labels,
// annotations, namespaces, selector and conflict policy, templates compiled), the every-kind
// entry, the owner kinds followed and the sources of truth. parse.ts reads kinds.yaml into it and
// overlay.ts lays the command-line flags over it; nothing here parses.
import { Buffer } from 'node:buffer';
import type { Selector } from '../apimachinery/selector.ts';
import type { ProtectMode } from './protect.ts';
import type { ReferenceSpec } from './references.ts';
import type { SourceSpec } from './sources.ts';
import type { Template } from './template.ts';

/** What to do when another field manager owns a label: take it over (force) or leave it (skip). */
export type ConflictPolicy = 'force' | 'skip';

/** The two maps of an object's metadata labeller writes keys of. */
export type MetadataField = 'labels' | 'annotations';

/** The API server's limit on the total size of an object's annotations, keys and values (apimachinery's TotalAnnotationSizeLimitB). */
export const ANNOTATIONS_MAX_BYTES = 256 * 1024;

export interface KindConfig {
  /** Where the entry came from, for messages: 'kinds.yaml: kinds[0]' or '--kinds "secrets"'. */
  readonly where: string;
  /** As the user wrote it; discovery resolves it to an API resource. */
  readonly resource: string;
  /** Empty means all namespaces. */
  readonly namespaces: readonly string[];
  readonly selector: Selector | undefined;
  /** The effective labels: the global ones merged with the kind's own. */
  readonly labels: ReadonlyMap<string, Template>;
  /** The effective annotations, merged as labels are. */
  readonly annotations: ReadonlyMap<string, Template>;
  readonly conflicts: ConflictPolicy;
  /** Keys only labeller may set (protect.ts); undefined: none. */
  readonly protect?: Protection | undefined;
  /** How labeller meets other managers that set its keys (labelling/fights.ts), from the file's `fights`; the defaults when absent. */
  readonly fights?: FightSettings | undefined;
}

/** An entry's protected keys, of each map, and what the API server does with a change of one. */
export interface Protection {
  readonly mode: ProtectMode;
  readonly labels: ReadonlySet<string>;
  readonly annotations: ReadonlySet<string>;
}

/** Every template a kind renders, labels' and annotations'. */
export function templatesOf(kind: Pick<KindConfig, MetadataField>): Template[] {
  return [...kind.labels.values(), ...kind.annotations.values()];
}

export interface Config {
  /** The kinds listed by name (may be empty when everyKind is set). */
  readonly kinds: readonly KindConfig[];
  /** The `resource: "*"` entry: every kind discovery serves, besides those listed by name. */
  readonly everyKind?: EveryKindConfig | undefined;
  /**
   * Owner kinds (kubectl-style names) that owner.* and root.* follow besides the built-in
   * workload chain; an ownerReference to any other kind is not followed.
   */
  readonly ownerKinds: readonly string[];
  /** The sources of truth templates look values up in, by name. */
  readonly sources: ReadonlyMap<string, SourceSpec>;
  /** The related objects templates may read by reference (references.ts), by name: the built-in ones and the file's. */
  readonly references: ReadonlyMap<string, ReferenceSpec>;
  /** What `labeller status` checks besides the counts; nothing the controller acts on. */
  readonly coverage?: CoverageSettings | undefined;
  /** Identities that may change protected keys besides labeller: user names, and `group:<name>`. */
  readonly protectAllow?: readonly string[] | undefined;
  /**
   * Which of two configs is the newer, for a shard group whose members disagree (the chart writes
   * the release's revision); not part of the fingerprint, so a new generation of the same config
   * is the same config.
   */
  readonly generation?: number | undefined;
}

export interface FightSettings {
  /** The field managers whose changes of labeller's keys it backs off from, when they keep making them. */
  readonly yieldTo: readonly string[];
}

export interface CoverageSettings {
  /**
   * The most labels a cost tool imports per object, the first in alphabetical order (AWS split
   * cost allocation: 50): `status` names the configured keys an object carrying more would lose.
   */
  readonly maxLabels: number;
}

/** The resource name that stands for every kind. */
export const EVERY_KIND = '*';

/** Which resources the every-kind entry covers: namespaced ones, cluster-scoped ones, or both. */
export type EveryKindScope = 'namespaced' | 'cluster' | 'all';

export interface EveryKindConfig {
  /** Its settings as for any kind (resource "*"): namespaces, selector, labels, conflicts. */
  readonly kind: KindConfig;
  readonly scope: EveryKindScope;
  /** The user's exclusions (kubectl-style), applied on top of DEFAULT_EXCLUDES. */
  readonly exclude: readonly string[];
}

/** The settings of every entry of `config`: the kinds listed by name, and the every-kind entry. */
export function kindSettings(config: Pick<Config, 'kinds' | 'everyKind'>): KindConfig[] {
  return config.everyKind ? [...config.kinds, config.everyKind.kind] : [...config.kinds];
}

/** Whether an entry of `config` protects keys (config/protect.ts). */
export function protectsKeys(config: Pick<Config, 'kinds' | 'everyKind'>): boolean {
  return kindSettings(config).some((kind) => kind.protect !== undefined);
}

/** The size the API server counts: UTF-8 bytes. */
export function byteLength(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}
