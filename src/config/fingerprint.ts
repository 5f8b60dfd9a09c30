// A config's fingerprint: equal for configs that label alike whatever the order they were
// written in, different as soon as one label, annotation, kind, namespace, selector, policy, owner
// kind, reference, protection, or the every-kind entry's scope or exclusions differ. The field-manager guard compares
// fingerprints to tell a replica of the same config from another config.
import { createHash } from 'node:crypto';
import type { Config, KindConfig } from './model.ts';
import { referenceDocument } from './references.ts';
import { ACCEPT_SMALLER_AFTER_MS } from './sources.ts';

/**
 * Not localeCompare: the order must not depend on the process's locale (replicas compare
 * fingerprints), and collation loads ICU data, 2 MiB of RSS.
 */
const byCodeUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

const entries = (map: KindConfig['labels']) =>
  [...map].map(([key, template]) => [key, template.source]).sort(([a = ''], [b = '']) => byCodeUnits(a, b));

const settings = (kind: KindConfig) => ({
  resource: kind.resource,
  namespaces: [...kind.namespaces].sort(),
  selector: kind.selector?.toString() ?? '',
  labels: entries(kind.labels),
  // Only when there are some: a config without annotations keeps the fingerprint it had before them.
  ...(kind.annotations.size > 0 ? { annotations: entries(kind.annotations) } : {}),
  conflicts: kind.conflicts,
  // Only when on: a config without protection keeps the fingerprint it had before it.
  ...(kind.protect
    ? {
      protect: {
        mode: kind.protect.mode,
        labels: [...kind.protect.labels].sort(byCodeUnits),
        annotations: [...kind.protect.annotations].sort(byCodeUnits),
      },
    }
    : {}),
  ...(kind.fights ? { yieldTo: [...kind.fights.yieldTo].sort(byCodeUnits) } : {}),
});

export function configFingerprint(config: Config): string {
  const kinds = config.kinds.map(settings).sort((a, b) => byCodeUnits(a.resource, b.resource));
  const owners = [...config.ownerKinds].sort(byCodeUnits);
  // A source's acceptSmallerAfter only when not the default: configs with sources keep the fingerprint they had before it.
  const sources = [...config.sources.values()].sort((a, b) => byCodeUnits(a.name, b.name)).map((
    { acceptSmallerAfterMs, ...source },
  ) => acceptSmallerAfterMs === ACCEPT_SMALLER_AFTER_MS ? source : { ...source, acceptSmallerAfterMs });
  const every = config.everyKind;
  const allow = [...(config.protectAllow ?? [])].sort(byCodeUnits);
  // The file's own references (the built-in ones are the same for every config).
  const references = [...config.references.values()].filter((r) => r.where !== 'built in').map(referenceDocument)
    .sort((a, b) => byCodeUnits(a['name'] ?? '', b['name'] ?? ''));
  // Without owner kinds, sources, an every-kind entry and identities allowed to change protected
  // keys, the fingerprint is what it was before they existed: replicas of one config on either
  // side of an upgrade agree.
  const document = owners.length > 0 || sources.length > 0 || every || allow.length > 0 || references.length > 0
    ? {
      kinds,
      ownerKinds: owners,
      sources,
      ...(every && {
        everyKind: { ...settings(every.kind), scope: every.scope, exclude: [...every.exclude].sort(byCodeUnits) },
      }),
      ...(allow.length > 0 ? { protectAllow: allow } : {}),
      ...(references.length > 0 ? { references } : {}),
    }
    : kinds;
  return `sha256:${createHash('sha256').update(JSON.stringify(document)).digest('hex').slice(0, 16)}`;
}
