// Row 6, the idle cost: labeller's requests per minute while nothing changes, from the audit
// log, and its list requests among them (relists).
import { type AuditRequest, byVerb, fillsCache, formatVerbs } from '../../test/cluster/audit.ts';
import type { Labeller } from '../../test/process/labeller.ts';
import { sleep } from '../../test/process/sleep.ts';
import type { Bench } from './context.ts';
import { load1, type Row } from './report.ts';

export interface IdleResults {
  minutes: number;
  requests: Record<string, number>;
  perMinute: number;
  relists: number;
  load: number;
}

/** Watches `labeller`'s requests for `minutes`; it must keep running. */
export async function idleCost(bench: Bench, labeller: Labeller, minutes: number): Promise<IdleResults> {
  const { audit, signal, log } = bench;
  log(`idle: watching labeller's requests for ${minutes} min`);
  const idleFrom = Date.now();
  const idleUntil = idleFrom + minutes * 60_000;
  while (Date.now() < idleUntil) {
    await sleep(Math.min(5000, idleUntil - Date.now()), signal);
    labeller.assertRunning();
  }
  const requests: AuditRequest[] = audit.requests(idleFrom, idleUntil);
  const results = {
    minutes,
    requests: byVerb(requests),
    perMinute: requests.length / minutes,
    relists: requests.filter((r) => fillsCache(r.verb, r.uri)).length,
    load: load1(),
  };
  log(`idle: ${formatVerbs(results.requests)}`);
  return results;
}

export function idleRows(idle: IdleResults): Row[] {
  return [
    {
      id: '6',
      measurement: `Idle: labeller’s requests per minute (over ${idle.minutes} min)`,
      result: `${idle.perMinute.toFixed(2)} (${formatVerbs(idle.requests)})`,
      target: '',
      verdict: '',
      load: idle.load,
    },
    {
      id: '6',
      measurement: 'Idle: relists (lists or streaming lists after the initial ones)',
      result: `${idle.relists} in ${idle.minutes} min`,
      target: '0 in 10 idle min',
      verdict: idle.relists > 0 ? 'miss' : idle.minutes >= 10 ? 'pass' : 'incomplete',
      ...(idle.relists === 0 && idle.minutes < 10
        ? { verdictNote: `(${idle.minutes} of 10 min observed; --idle-minutes 10)` }
        : {}),
      load: idle.load,
    },
  ];
}
