// A process's memory and CPU seen from outside, as a container runtime sees them (Linux /proc):
// no cooperation from the process, so the same reading works for labeller on Node and on Deno.
import { readdirSync, readFileSync } from 'node:fs';

export interface ProcSample {
  /** Epoch ms of the reading. */
  readonly at: number;
  /** Resident set size now (VmRSS), bytes. */
  readonly rss: number;
  /** Peak resident set size so far (VmHWM), bytes. */
  readonly peakRss: number;
  /** User + system CPU time so far (utime + stime), seconds. */
  readonly cpuSeconds: number;
  /** Of which in the kernel (stime): syscalls, socket and pipe writes. */
  readonly systemSeconds: number;
}

/** Clock ticks per second of /proc/<pid>/stat times (USER_HZ: 100 on every Linux build that matters). */
const USER_HZ = 100;

/** Reads /proc/<pid>; undefined once the process is gone. */
export function procSample(pid: number): ProcSample | undefined {
  let status: string;
  let stat: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  const kib = (field: string): number =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  // The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const [utime, stime] = [Number(fields[11]), Number(fields[12])]; // fields 14 and 15 of stat(5)
  return {
    at: Date.now(),
    rss: kib('VmRSS'),
    peakRss: kib('VmHWM'),
    cpuSeconds: (utime + stime) / USER_HZ,
    systemSeconds: stime / USER_HZ,
  };
}

/** The processes whose command line mentions `text` (a control plane's directory: its kube-apiserver and etcd). */
export function processesWith(text: string): number[] {
  return readdirSync('/proc').filter((entry) => /^\d+$/.test(entry)).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(text);
    } catch {
      return false; // gone meanwhile
    }
  }).map(Number);
}

/** The CPU seconds `pids` have used so far, together (those gone count 0). */
export const cpuSeconds = (pids: readonly number[]): number =>
  pids.reduce((total, pid) => total + (procSample(pid)?.cpuSeconds ?? 0), 0);

/** Samples a process every `intervalMs` until stopped; keeps every reading (a few per second). */
export class ProcSampler {
  readonly samples: ProcSample[] = [];
  readonly #pid: number;
  readonly #timer: ReturnType<typeof setInterval>;

  constructor(pid: number, intervalMs = 100) {
    this.#pid = pid;
    this.sample();
    this.#timer = setInterval(() => this.sample(), intervalMs);
  }

  /** Takes a reading now (e.g. right before the process is stopped) and returns it. */
  sample(): ProcSample | undefined {
    const s = procSample(this.#pid);
    if (s) this.samples.push(s);
    return s;
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  /** The CPU seconds used at `at` (epoch ms), linearly interpolated between the readings around it. */
  cpuAt(at: number): number | undefined {
    const after = this.samples.findIndex((s) => s.at >= at);
    if (after < 0) return this.samples.at(-1)?.cpuSeconds;
    const b = this.samples[after]!;
    const a = this.samples[after - 1];
    if (!a || b.at === a.at) return b.cpuSeconds;
    return a.cpuSeconds + ((b.cpuSeconds - a.cpuSeconds) * (at - a.at)) / (b.at - a.at);
  }

  get peakRss(): number {
    return this.samples.reduce((m, s) => Math.max(m, s.peakRss), 0);
  }
}
