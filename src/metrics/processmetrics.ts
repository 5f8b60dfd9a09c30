// The standard process_* and nodejs_* metrics that dashboards read, computed when scraped.
// (prom-client's collectDefaultMetrics, which labeller once used, also sampled the event loop
// every 10 ms and observed every garbage collection: about 7 MiB of RSS and CPU while idle.)
import { readdirSync, readFileSync } from 'node:fs';
import { Counter, Gauge, type Registry } from './prometheus.ts';

const started = Date.now() / 1000 - process.uptime();

export function registerProcessMetrics(registry: Registry): void {
  const registers = [registry];
  const gauge = (name: string, help: string, read: () => number | undefined): void => {
    new Gauge({
      name,
      help,
      registers,
      collect() {
        const value = read();
        if (value !== undefined) this.set(value);
      },
    });
  };
  /** A counter of what `read` says has been spent so far, brought up to it at each scrape. */
  const spent = (name: string, help: string, read: () => number): void => {
    let counted = 0;
    new Counter({
      name,
      help,
      registers,
      collect() {
        const total = read();
        if (total > counted) this.inc(undefined, total - counted);
        counted = Math.max(counted, total);
      },
    });
  };
  const cpu = (): NodeJS.CpuUsage => process.cpuUsage();
  spent('process_cpu_user_seconds_total', 'User CPU time spent in seconds', () => cpu().user / 1e6);
  spent('process_cpu_system_seconds_total', 'System CPU time spent in seconds', () => cpu().system / 1e6);
  spent('process_cpu_seconds_total', 'Total user and system CPU time spent in seconds', () => {
    const { user, system } = cpu();
    return (user + system) / 1e6;
  });
  gauge('process_start_time_seconds', 'Start time of the process since unix epoch in seconds', () => started);
  gauge('process_resident_memory_bytes', 'Resident memory size in bytes', () => process.memoryUsage.rss());
  gauge('process_virtual_memory_bytes', 'Virtual memory size in bytes', () => procStatus('VmSize'));
  gauge('process_heap_bytes', 'Process heap size in bytes', () => procStatus('VmData'));
  gauge('process_open_fds', 'Number of open file descriptors', () => {
    try {
      return readdirSync('/proc/self/fd').length;
    } catch {
      return undefined;
    }
  });
  gauge('process_max_fds', 'Maximum number of open file descriptors', () => {
    const limit = /^Max open files\s+(\d+)/m.exec(procFile('/proc/self/limits') ?? '');
    return limit ? Number(limit[1]) : undefined;
  });
  const heap = (): NodeJS.MemoryUsage => process.memoryUsage();
  gauge('nodejs_heap_size_total_bytes', 'Process heap size from Node.js in bytes', () => heap().heapTotal);
  gauge('nodejs_heap_size_used_bytes', 'Process heap size used from Node.js in bytes', () => heap().heapUsed);
  gauge('nodejs_external_memory_bytes', 'Node.js external memory size in bytes', () => heap().external);
  const version = new Gauge({
    name: 'nodejs_version_info',
    help: 'Node.js version info',
    labelNames: ['version', 'major', 'minor', 'patch'],
    registers,
  });
  const [major = '', minor = '', patch = ''] = process.versions.node.split('.');
  version.set({ version: process.version, major, minor, patch }, 1);
}

/** A `kB` line of /proc/self/status, in bytes; undefined off Linux. */
function procStatus(field: string): number | undefined {
  const line = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(procFile('/proc/self/status') ?? '');
  return line ? Number(line[1]) * 1024 : undefined;
}

function procFile(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}
