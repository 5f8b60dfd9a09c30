// How long labeller's event loop was held, seen from inside: a probe from outside also counts the
// time the process waited for a core (on 2 cores shared with the API server, etcd and the bench).
// On Node, labeller is started with loopdelaypreload.ts imported, which logs each second's longest
// hold; on Deno there is no such figure.
import type { Labeller } from '../../test/process/labeller.ts';
import type { Launch } from './launch.ts';

export const LOOP_DELAY_MSG = 'bench: event-loop delay';

/** `launch` with the preload added to its Node flags; as it is on Deno. */
export function withLoopDelay<L extends Pick<Launch, 'runtime' | 'v8Flags'>>(launch: L): L {
  if (launch.runtime !== 'node') return launch;
  return {
    ...launch,
    v8Flags: [...launch.v8Flags, '--import', new URL('./loopdelaypreload.ts', import.meta.url).href],
  };
}

/** The longest hold of the loop and the longest GC pause, in ms, over some seconds. */
export interface LoopHolds {
  readonly maxMs: number;
  readonly gcMaxMs: number;
}

/** The longest hold and GC pause in the seconds that overlap [from, to] (Date.now() times); undefined without figures. */
export function loopDelayBetween(labeller: Labeller, from: number, to: number): LoopHolds | undefined {
  let holds: LoopHolds | undefined;
  labeller.logs.forEach((line, i) => {
    const at = labeller.arrivals[i];
    const { maxMs, gcMaxMs } = line;
    if (line.msg !== LOOP_DELAY_MSG || at === undefined || typeof maxMs !== 'number') return;
    // A line covers the second before it was written, stretched by the hold it reports.
    if (at < from || at - 1000 - maxMs > to) return;
    holds = {
      maxMs: Math.max(holds?.maxMs ?? 0, maxMs),
      gcMaxMs: Math.max(holds?.gcMaxMs ?? 0, typeof gcMaxMs === 'number' ? gcMaxMs : 0),
    };
  });
  return holds;
}
