// Reading labeller's /metrics from a test: one sample of the Prometheus text format.

/**
 * The value of one sample, e.g. sample(text, 'controller_runtime_reconcile_total', { result: 'success' }),
 * or of a metric without labels, e.g. sample(text, 'labeller_config_last_reload_successful').
 */
export function sample(metrics: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const line = metrics.split('\n').find((l) =>
    (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) &&
    Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`))
  );
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** Scrapes labeller's /metrics on a loopback port and returns one sample of it. */
export async function scrape(
  port: number,
  name: string,
  labels: Record<string, string> = {},
): Promise<number | undefined> {
  const response = await fetch(`http://127.0.0.1:${port}/metrics`);
  return sample(await response.text(), name, labels);
}
