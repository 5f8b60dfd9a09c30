// The config file, followed in controller mode (a mounted ConfigMap's symlink swap included): each
// new content is built as at start (flags still win over it) and applied through the kind set. A
// change that is wrong (a config error, a kind that is a mistake, another config holding the field
// manager) is rejected: logged, counted and reported as an Event on labeller's Pod, with the last
// good config left in force. A change that fails for a passing reason (the API server away) is
// tried again with backoff until it applies or the file changes again.
import type { Metrics } from '../metrics/metrics.ts';
import { watchFile } from '../runtime/filewatch.ts';
import { aborted } from '../util/aborted.ts';
import { Backoff } from '../util/backoff.ts';
import type { Logger } from '../util/log.ts';
import { sleep } from '../util/sleep.ts';
import { UsageError } from '../util/usage.ts';
import type { Config } from './model.ts';

export interface ConfigFile {
  readonly path: string;
  /** The content the config in force was built from. */
  readonly text: string;
  /** Builds a config from new content, as at start; throws (ConfigError) when it is invalid. */
  build(text: string): Config;
}

export interface Following {
  /** Makes a config the one in force (KindSet.apply); answers what it changed, each list logged by its name. */
  apply(config: Config, signal: AbortSignal): Promise<Readonly<Record<string, readonly string[]>>>;
  readonly metrics?: Pick<Metrics, 'configReloaded'> | undefined;
  /** Told of each change rejected, with why (an Event on labeller's Pod). */
  readonly rejected?: ((message: string) => void) | undefined;
  readonly log: Logger;
}

/** Follows `file` until `signal` aborts; resolves once the change under way (if any) is done. */
export async function followConfigFile(file: ConfigFile, following: Following, signal: AbortSignal): Promise<void> {
  const { log, metrics, rejected } = following;
  /** The newest content seen: a retry gives way to it. */
  let latest: string | Error = file.text;
  const apply = async (content: string | Error): Promise<void> => {
    const backoff = new Backoff({ initialMs: 1_000, maxMs: 60_000 });
    while (!signal.aborted && content === latest) {
      try {
        if (content instanceof Error) {
          throw new UsageError(`${file.path}: cannot read the config file (${content.message})`);
        }
        const change = await following.apply(file.build(content), signal);
        metrics?.configReloaded(true);
        const lists = Object.entries(change).filter(([, list]) => list.length > 0);
        log.info('config reloaded', { file: file.path, ...Object.fromEntries(lists) });
        return;
      } catch (error) {
        if (signal.aborted) return;
        const message = error instanceof Error ? error.message : String(error);
        if (error instanceof UsageError) {
          metrics?.configReloaded(false);
          log.error('config change rejected; the last good config stays in force', {
            file: file.path,
            error: message,
          });
          rejected?.(`${message}; the last good config stays in force`);
          return;
        }
        const retryInMs = Math.round(backoff.next());
        log.warn('config change not applied yet; retrying', { file: file.path, error: message, retryInMs });
        await sleep(retryInMs, signal);
      }
    }
  };
  // One change at a time, in the order they were seen.
  let applying = Promise.resolve();
  watchFile(file.path, file.text, (content) => {
    latest = content;
    applying = applying.then(() => apply(content));
  }, { signal });
  await aborted(signal);
  await applying;
}
