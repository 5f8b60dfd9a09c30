// Loaded into labeller by --scrape (`node --import`, see loopdelay.ts), not shipped: each second,
// the longest time its event loop was held and its longest garbage collection pause, as a log
// line on stderr. libuv samples the delay every 10 ms (perf_hooks.monitorEventLoopDelay, whose
// figures include those 10 ms); the pauses come from a PerformanceObserver of 'gc' entries.
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { LOOP_DELAY_MSG } from './loopdelay.ts';

const RESOLUTION_MS = 10;
const delay = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
delay.enable();
let gcMaxMs = 0;
new PerformanceObserver((entries) => {
  for (const entry of entries.getEntries()) gcMaxMs = Math.max(gcMaxMs, entry.duration);
}).observe({ entryTypes: ['gc'] });
setInterval(() => {
  if (delay.count > 0) {
    const maxMs = Math.max(0, delay.max / 1e6 - RESOLUTION_MS);
    const line = { time: new Date().toISOString(), level: 'debug', msg: LOOP_DELAY_MSG, maxMs, gcMaxMs };
    process.stderr.write(`${JSON.stringify(line)}\n`);
  }
  delay.reset();
  gcMaxMs = 0;
}, 1000).unref();
