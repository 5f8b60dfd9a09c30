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

/** The longest hold in the seconds that overlap [from, to] (Date.now() times); undefined without figures. */
export function loopDelayBetween(labeller: Labeller, from: number, to: number): number | undefined {
  let longest: number | undefined;
  labeller.logs.forEach((line, i) => {
    const at = labeller.arrivals[i];
    if (line.msg !== LOOP_DELAY_MSG || at === undefined || typeof line['maxMs'] !== 'number') return;
    // A line covers the second before it was written, stretched by the hold it reports.
    if (at >= from && at - 1000 - line['maxMs'] <= to) longest = Math.max(longest ?? 0, line['maxMs']);
  });
  return longest;
}
