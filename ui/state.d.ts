// Types of ui/state.js, for the tests that run it in node.
export interface Gate {
  readonly running: string | undefined;
  run<T>(name: string, task: () => T | Promise<T>): Promise<T> | undefined;
}
export function createGate(onChange: (running: string | undefined) => void): Gate;
