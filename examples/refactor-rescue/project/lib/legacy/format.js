export function format(text) {
  return text.trim();
}
