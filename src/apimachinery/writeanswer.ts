// A write's answer (an apply's or a JSON Patch's), read as little as its reader needs. The answer
// holds the whole of metadata, and managedFields is most of it (an entry per manager, each a tree
// of the fields it owns), while a writer reads the resourceVersion, and the labels and annotations
// only to print a patch (a dry run, a debug log): parsing them cost a PATCH more CPU and garbage
// than anything else labeller does with the answer. So the text before managedFields is decoded,
// the version found in it, and the rest parsed on first read.
// The API server writes the fields of an object in its Go structs' order: kind and apiVersion,
// then metadata's name, generateName, namespace, selfLink, uid, resourceVersion, …, managedFields
// last. So the first `"resourceVersion":"` is metadata's (a name or label value is a string, in
// which a quote is escaped), and the text up to `,"managedFields":[` closed with `}}` is the
// object's kind, apiVersion and metadata without it (a full object's other fields, which follow
// metadata, go with it). An answer that does not read so is parsed whole.
import type { PartialObjectMetadata } from './objects.ts';

const MANAGED_FIELDS = ',"managedFields":[';
const RESOURCE_VERSION = '"resourceVersion":"';

/**
 * An answer's bytes, as a Buffer holds them: where a text starts in them (a byte offset), and a
 * span of them decoded. Only the part read is decoded: managedFields never becomes a string.
 */
export interface AnswerBytes {
  indexOf(text: string): number;
  toString(encoding: 'utf8', start?: number, end?: number): string;
}

/** An object as a write answered it: its resourceVersion at hand, whether or not its metadata is parsed yet. */
export interface Written extends PartialObjectMetadata {
  readonly resourceVersion: string;
}

/**
 * A write's answer: the text before managedFields decoded, and its resourceVersion found in it at
 * once; that text parsed when first read. The bytes are not kept: a socket's chunk held past a
 * young-generation collection costs the old generation its whole backing store, and more full
 * collections.
 */
export class WriteAnswer implements Written {
  readonly resourceVersion: string;
  #head: string | undefined;
  #parsed: PartialObjectMetadata | undefined;

  constructor(bytes: AnswerBytes) {
    const cut = bytes.indexOf(MANAGED_FIELDS);
    const head = cut < 0 ? undefined : bytes.toString('utf8', 0, cut);
    const version = head === undefined ? undefined : versionIn(head);
    if (version !== undefined) {
      this.resourceVersion = version;
      this.#head = head;
    } else {
      this.#parsed = parseWriteAnswer(bytes);
      this.resourceVersion = this.#parsed.metadata.resourceVersion;
    }
  }

  get kind(): string {
    return this.#read().kind;
  }

  get apiVersion(): string {
    return this.#read().apiVersion;
  }

  get metadata(): PartialObjectMetadata['metadata'] {
    return this.#read().metadata;
  }

  #read(): PartialObjectMetadata {
    if (this.#parsed) return this.#parsed;
    this.#parsed = JSON.parse(`${this.#head}}}`) as PartialObjectMetadata;
    this.#head = undefined;
    return this.#parsed;
  }
}

/** The value of the first `"resourceVersion":"…"` in `text`: metadata's, where the text is an answer's start. */
function versionIn(text: string): string | undefined {
  const at = text.indexOf(RESOURCE_VERSION);
  if (at < 0) return undefined;
  const start = at + RESOURCE_VERSION.length;
  const end = text.indexOf('"', start);
  return end > start ? text.slice(start, end) : undefined;
}

/** The answer's kind, apiVersion and metadata, without managedFields. */
export function parseWriteAnswer(answer: AnswerBytes): PartialObjectMetadata {
  const at = answer.indexOf(MANAGED_FIELDS);
  if (at >= 0) {
    try {
      const cut = JSON.parse(`${answer.toString('utf8', 0, at)}}}`) as Partial<PartialObjectMetadata>;
      if (typeof cut.metadata?.resourceVersion === 'string') return cut as PartialObjectMetadata;
    } catch {
      // Not the shape above: read it whole.
    }
  }
  return parseWhole(answer);
}

function parseWhole(answer: AnswerBytes): PartialObjectMetadata {
  return JSON.parse(answer.toString('utf8')) as PartialObjectMetadata;
}
