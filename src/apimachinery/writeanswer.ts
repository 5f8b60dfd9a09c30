// A write's answer (an apply's or a JSON Patch's) read without its managedFields. The answer holds
// the whole of metadata, and managedFields is most of it (an entry per manager, each a tree of
// the fields it owns), while a writer reads the labels, annotations and resourceVersion only:
// parsing the rest cost a PATCH more CPU and garbage than anything else labeller does with it.
// The API server writes ObjectMeta's fields in its Go struct's order, managedFields last; so the
// text up to `,"managedFields":[` closed with `}}` is the object's kind, apiVersion and metadata
// without it (a full object's other fields, which follow metadata, go with it). That string
// cannot occur earlier: a label's or annotation's value is a string, never an array, and inside
// a JSON string a quote is escaped. An answer that does not read so is parsed whole.
import type { PartialObjectMetadata } from './objects.ts';

const MANAGED_FIELDS = ',"managedFields":[';

/**
 * An answer's bytes, as a Buffer holds them: where a text starts in them (a byte offset), and a
 * span of them decoded. Only the part read is decoded: managedFields never becomes a string.
 */
export interface AnswerBytes {
  indexOf(text: string): number;
  toString(encoding: 'utf8', start?: number, end?: number): string;
}

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
  return JSON.parse(answer.toString('utf8')) as PartialObjectMetadata;
}
