// What loads a source: a loop that reports each new content of the source, or why it could not
// be read, until it is told to stop; and the parsing every loader shares.
import { load as loadYaml, YAMLException } from 'js-yaml';
import { type SourceContent, sourceContent, SourceContentError } from './content.ts';

/** A good read of a source. */
export interface Loaded {
  readonly content: SourceContent;
  /** The size of what was read, for the labeller_source_bytes gauge. */
  readonly bytes: number;
}

/** Reports each new content (or the failure of a read) until `signal` aborts; with `once`, reads once. */
export type Loader = (report: (result: Loaded | Error) => void, signal: AbortSignal, once: boolean) => Promise<void>;

/**
 * A YAML or JSON document's content; a document that is empty, not a map of values or fields, or
 * whose aliases expand far beyond its size throws SourceContentError.
 */
export function parseContent(text: string): Loaded {
  let document: unknown;
  try {
    document = loadYaml(text);
  } catch (error) {
    if (!(error instanceof YAMLException)) throw error;
    throw new SourceContentError(`not YAML or JSON: ${error.reason}`);
  }
  const bytes = Buffer.byteLength(text);
  // Written out, every key and field takes a few bytes: aliases may repeat some, not multiply them.
  return { content: sourceContent(document, bytes + 10_000), bytes };
}

/** `work` as a result to report: its content, or the error it threw. */
export function attempt(work: () => Loaded): Loaded | Error {
  try {
    return work();
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}
