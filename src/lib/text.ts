// Text for messages: lists of paths (the first few, and how many more), values from untrusted JSON.

/** `a, b, c and 3 more`: the first `count` of `items` named, the rest counted. */
export function namedAndMore(items: readonly string[], count = 5): string {
  const named = items.slice(0, count).join(', ');
  return items.length > count ? `${named} and ${items.length - count} more` : named;
}

/** `text` to quote in a message: whole, or its start and its length when longer than `length`. */
export function clipped(text: string, length = 80): string {
  return text.length > length ? `${text.slice(0, length)}… (${text.length} characters)` : text;
}

/**
 * `String(value)` for a value read from untrusted JSON: an object that `String()` cannot convert
 * (`{"toString": 1}`, or a list holding one) reads as its kind, `[object Object]`.
 */
export function textOf(value: unknown): string {
  try {
    return String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}

/**
 * The start of a value's JSON (at most `length` characters), to show in a message; its kind when
 * it nests too deep to write out, `undefined` for what JSON cannot hold.
 */
export function jsonPreview(value: unknown, length = 120): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    if (Array.isArray(value)) return 'a list nested too deep to show';
    return typeof value === 'object' && value !== null
      ? 'an object nested too deep to show'
      : textOf(value);
  }
  if (text === undefined) return 'undefined';
  return text.length > length ? `${text.slice(0, length)}…` : text;
}
