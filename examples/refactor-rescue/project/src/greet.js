import { format } from '../lib/legacy/format.js';

export function greet(name) {
  return format(`Hello, ${name}!`);
}
