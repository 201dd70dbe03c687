// The page's state logic that needs no browser (ui/state.js), run in node.
import { describe, expect, it } from 'vitest';
import {
  actionStateOf,
  createGate,
  moveCursor,
  prunedCheckpoints,
  storedBody,
} from '../../ui/state.js';

describe("the page's state", () => {
  it('runs one request at a time, and says which runs', async () => {
    const heard: (string | undefined)[] = [];
    const gate = createGate((running) => heard.push(running));
    let finish: (value: string) => void = () => {};
    const first = gate.run('rollback', () => new Promise<string>((done) => (finish = done)));
    expect(gate.running).toBe('rollback');
    // A second click while the first runs starts nothing.
    let started = false;
    expect(gate.run('undo', () => (started = true))).toBeUndefined();
    finish('ok');
    expect(await first).toBe('ok');
    expect(started).toBe(false);
    expect(gate.running).toBeUndefined();
    // A failure frees it too, and still reaches the caller.
    await expect(gate.run('undo', () => Promise.reject(new Error('refused')))).rejects.toThrow(
      'refused',
    );
    expect(await gate.run('commit', () => 'done')).toBe('done');
    expect(heard).toEqual(['rollback', undefined, 'undo', undefined, 'commit', undefined]);
  });

  it('moves through the timeline by key, staying at its ends', () => {
    const seqs = [3, 5, 9];
    expect(moveCursor(seqs, undefined, 'ArrowDown')).toBe(3);
    expect(moveCursor(seqs, undefined, 'ArrowUp')).toBe(9);
    expect(moveCursor(seqs, 3, 'ArrowDown')).toBe(5);
    expect(moveCursor(seqs, 9, 'ArrowDown')).toBe(9);
    expect(moveCursor(seqs, 3, 'ArrowUp')).toBe(3);
    expect(moveCursor(seqs, 5, 'Home')).toBe(3);
    expect(moveCursor(seqs, 5, 'End')).toBe(9);
    // An entry filtered out since: the keys start again from an end.
    expect(moveCursor(seqs, 4, 'ArrowDown')).toBe(3);
    expect(moveCursor(seqs, 5, 'a')).toBeUndefined();
    expect(moveCursor([], undefined, 'Home')).toBeUndefined();
  });

  it('tells the action a live process runs from one a killed process left', () => {
    const line = {
      seq: 7,
      kind: 'action-started',
      entry: { body: {} },
      action: { state: 'interrupted' },
    };
    expect(actionStateOf(line, { id: 7, pid: 4242 })).toEqual({ state: 'running', pid: 4242 });
    expect(actionStateOf(line, { id: 8, pid: 4242 })).toEqual({ state: 'interrupted' });
    expect(actionStateOf(line, undefined)).toEqual({ state: 'interrupted' });
  });

  it('knows the checkpoints pruned since', () => {
    const entries = [
      { seq: 2, kind: 'checkpoint-created', entry: { body: { label: 'one' } } },
      { seq: 3, kind: 'checkpoint-created', entry: { body: { label: 'two' } } },
      { seq: 4, kind: 'checkpoint-pruned', entry: { body: { label: 'one', checkpointSeq: 2 } } },
    ];
    expect(prunedCheckpoints(entries)).toEqual(new Set([2]));
  });

  it('shows binary bytes by their size, and says what was cut', () => {
    expect(storedBody({ text: 'hi\n', sizeBytes: 3, truncated: false })).toEqual({
      text: 'hi\n',
      note: undefined,
    });
    expect(
      storedBody({ text: '\u0000\uFFFD', sizeBytes: 2, truncated: false, base64: 'AP8=' }),
    ).toEqual({ text: '', note: 'binary, 2 bytes' });
    expect(storedBody({ text: 'yyyyy', sizeBytes: 5, truncated: true }).note).toBe(
      'truncated: only the first 5 bytes were kept',
    );
    expect(storedBody(undefined)).toEqual({ text: '', note: undefined });
  });
});
