/**
 * Kubernetes label and annotation key syntax (apimachinery's IsQualifiedName and IsValidLabelValue).
 * Validators return the problem as text, or undefined when the input is valid,
 * so each caller can say where the bad key or value came from.
 */
import { DNS1123_SUBDOMAIN_MAX_LENGTH, isDns1123Subdomain } from './names.ts';

/** A label set as it appears in metadata.labels. */
export type Labels = Readonly<Record<string, string>>;

/** The most characters of a label value, and of a key's name part. */
export const NAME_MAX_LENGTH = 63;
/** A non-empty label value, and a key's name part; RE2 reads it as JavaScript does (CEL's matches()). */
export const NAME_PATTERN = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const NAME_CHARACTERS =
  "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/** A key is an optional DNS-1123 subdomain prefix and "/", then a name of at most 63 characters. */
export function validateLabelKey(key: string): string | undefined {
  if (key === '') return 'key must not be empty (e.g. "tier" or "example.com/tier")';
  const slash = key.indexOf('/');
  if (slash === -1) return validateName(key);
  if (key.includes('/', slash + 1)) {
    return `key ${
      JSON.stringify(key)
    } must contain at most one "/", between the prefix and the name (e.g. "example.com/tier")`;
  }
  return validatePrefix(key.slice(0, slash)) ?? validateName(key.slice(slash + 1));
}

/** An annotation key has a label key's syntax, but for case: the API server checks it lowercased. */
export function validateAnnotationKey(key: string): string | undefined {
  return validateLabelKey(key.toLowerCase());
}

/** A value is empty, or at most 63 characters with the same syntax as a key's name part. */
export function validateLabelValue(value: string): string | undefined {
  if (value.length > NAME_MAX_LENGTH) {
    return `value must be ${NAME_MAX_LENGTH} characters or less (got ${value.length})`;
  }
  if (value !== '' && !NAME_PATTERN.test(value)) {
    return `value ${
      JSON.stringify(value)
    } must be empty or consist of ${NAME_CHARACTERS} (e.g. "MyValue", "my_value", "12345")`;
  }
  return undefined;
}

function validatePrefix(prefix: string): string | undefined {
  if (prefix === '') return 'prefix before "/" must not be empty (e.g. "example.com/tier")';
  if (prefix.length > DNS1123_SUBDOMAIN_MAX_LENGTH) {
    return `prefix must be ${DNS1123_SUBDOMAIN_MAX_LENGTH} characters or less (got ${prefix.length})`;
  }
  if (!isDns1123Subdomain(prefix)) {
    return `prefix ${JSON.stringify(prefix)} must be a lowercase DNS-1123 subdomain (e.g. "example.com")`;
  }
  return undefined;
}

function validateName(name: string): string | undefined {
  if (name === '') return 'name part must not be empty (e.g. "example.com/tier")';
  if (name.length > NAME_MAX_LENGTH) {
    return `name part must be ${NAME_MAX_LENGTH} characters or less (got ${name.length})`;
  }
  if (!NAME_PATTERN.test(name)) {
    return `name part must consist of ${NAME_CHARACTERS} (e.g. "MyName", "my.name", "123-abc")`;
  }
  return undefined;
}
