// Types of ui/state.js, for the tests that run it in node.
export interface Gate {
  readonly running: string | undefined;
  run<T>(name: string, task: () => T | Promise<T>): Promise<T> | undefined;
}

export function createGate(onChange: (running: string | undefined) => void): Gate;

export function moveCursor(
  seqs: readonly number[],
  current: number | undefined,
  key: string,
): number | undefined;

interface Line {
  seq: number;
  kind: string;
  entry: { body: Record<string, unknown> };
  action?: { state: string };
}

export function actionStateOf(
  line: Line,
  running: { id: number; pid: number } | undefined,
): { state: string | undefined; pid?: number };

export function prunedCheckpoints(entries: readonly Line[]): Set<number>;

export function storedBody(
  stored: { text: string; sizeBytes: number; truncated: boolean; base64?: string } | undefined,
): { text: string; note: string | undefined };
export function plural(count: number, noun: string): string;
