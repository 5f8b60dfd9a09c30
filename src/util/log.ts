// Structured logs: one JSON object per line (for log pipelines), or a readable line on a TTY.
// Every line about an object carries its kind, namespace and name as fields.

export type Level = 'debug' | 'info' | 'warn' | 'error';
export type Fields = Readonly<Record<string, unknown>>;

const RANK: Readonly<Record<Level, number>> = { debug: 10, info: 20, warn: 30, error: 40 };
export const LEVELS = Object.keys(RANK) as readonly Level[];

export interface Logger {
  debug(msg: string, fields?: Fields): void;
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
  /** Whether lines of `level` are written: a hot path builds a line's fields only then. */
  enabled(level: Level): boolean;
  /** A logger that adds `fields` to every line. */
  child(fields: Fields): Logger;
}

export interface LoggerOptions {
  readonly level: Level;
  readonly format: 'json' | 'text';
  readonly write?: (line: string) => void;
}

export function createLogger(options: LoggerOptions, bound: Fields = {}): Logger {
  const min = RANK[options.level];
  const write = options.write ?? ((line: string) => process.stderr.write(line));
  const emit = (level: Level, msg: string, fields: Fields | undefined): void => {
    if (RANK[level] < min) return;
    const all = { ...bound, ...fields };
    write(options.format === 'json' ? json(level, msg, all) : text(level, msg, all));
  };
  return {
    debug: (msg, fields) => emit('debug', msg, fields),
    info: (msg, fields) => emit('info', msg, fields),
    warn: (msg, fields) => emit('warn', msg, fields),
    error: (msg, fields) => emit('error', msg, fields),
    enabled: (level) => RANK[level] >= min,
    child: (fields) => createLogger(options, { ...bound, ...fields }),
  };
}

function json(level: Level, msg: string, fields: Fields): string {
  return `${JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields }, errorReplacer)}\n`;
}

function text(level: Level, msg: string, fields: Fields): string {
  const pairs = Object.entries(fields)
    .filter(([, v]) => v !== undefined && v !== '')
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v, errorReplacer)}`);
  const time = new Date().toISOString().slice(11, 23);
  return `${time} ${level.toUpperCase().padEnd(5)} ${msg}${pairs.length ? `  ${pairs.join(' ')}` : ''}\n`;
}

/** Errors as their message; durations (`…Ms` fields) as whole milliseconds. */
function errorReplacer(key: string, value: unknown): unknown {
  if (typeof value === 'number' && key.endsWith('Ms')) return Math.round(value);
  return value instanceof Error ? value.message : value;
}
