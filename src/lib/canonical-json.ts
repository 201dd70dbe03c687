/** A value that canonical JSON can encode. */
export type JsonValue =
  | null
  | boolean
  | number
  | string
  | JsonValue[]
  | { [key: string]: JsonValue };

/**
 * Encodes a value as canonical JSON in the manner of RFC 8785 (JCS): object keys sorted by their
 * UTF-16 code units, no white space, numbers and strings as ECMAScript's JSON.stringify writes
 * them. Two equal values always encode to the same bytes, so their digest can be re-verified by
 * any language. Throws a TypeError on values JSON cannot hold (NaN, Infinity, undefined in an
 * array, functions, bigints).
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === 'boolean' || typeof value === 'string') {
    return JSON.stringify(value);
  }
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError(`canonical JSON cannot encode ${value}`);
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) {
    return `[${value.map((item) => canonicalJson(item)).join(',')}]`;
  }
  if (typeof value === 'object') {
    const record = value as Record<string, unknown>;
    const members: string[] = [];
    // Default sort compares UTF-16 code units, which is exactly what RFC 8785 asks for.
    for (const key of Object.keys(record).sort()) {
      const member = record[key];
      if (member === undefined) continue;
      members.push(`${JSON.stringify(key)}:${canonicalJson(member)}`);
    }
    return `{${members.join(',')}}`;
  }
  throw new TypeError(`canonical JSON cannot encode a value of type ${typeof value}`);
}
