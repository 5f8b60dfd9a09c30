// Loaded into labeller by --scrape (`node --import`, see loopdelay.ts), not shipped: each second,
// the longest time its event loop was held, as a log line on stderr. libuv samples the delay every
// 10 ms (perf_hooks.monitorEventLoopDelay, whose figures include those 10 ms).
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { LOOP_DELAY_MSG } from './loopdelay.ts';

const RESOLUTION_MS = 10;
const delay = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
delay.enable();
setInterval(() => {
  if (delay.count > 0) {
    const maxMs = Math.max(0, delay.max / 1e6 - RESOLUTION_MS);
    process.stderr.write(
      `${JSON.stringify({ time: new Date().toISOString(), level: 'debug', msg: LOOP_DELAY_MSG, maxMs })}\n`,
    );
  }
  delay.reset();
}, 1000).unref();
