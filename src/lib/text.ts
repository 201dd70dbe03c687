// Lists of paths in messages: the first few, and how many more.

/** `a, b, c and 3 more`: the first `count` of `items` named, the rest counted. */
export function namedAndMore(items: readonly string[], count = 5): string {
  const named = items.slice(0, count).join(', ');
  return items.length > count ? `${named} and ${items.length - count} more` : named;
}
