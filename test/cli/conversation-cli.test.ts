import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { rewind } from '../helpers/cli.js';
import { ROOT, runNode } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';

const call = {
  role: 'assistant',
  content: null,
  tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'exec', arguments: '{}' } }],
};

describe('rewind conversation', () => {
  it('records a conversation with a checkpoint, and rollback writes the repaired one where asked', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    await writeFile(join(cwd, 'a.txt'), 'one');
    await writeFile(
      join(cwd, 'messages.json'),
      JSON.stringify([{ role: 'user', content: 'go' }, call]),
    );
    const checkpoint = await rewind(cwd, ['checkpoint', 'base', '--messages', 'messages.json']);
    expect(checkpoint.code).toBe(0);
    const later = [
      { role: 'user', content: 'go' },
      call,
      { role: 'tool', tool_call_id: 'call_1', content: 'ok' },
    ];
    const synced = await rewind(cwd, ['conversation', 'sync', '-'], {
      stdin: JSON.stringify(later),
    });
    expect(synced.stdout).toBe('Recorded the conversation: 3 messages (openai-chat).\n');
    const again = await rewind(cwd, ['conversation', 'sync', '-'], {
      stdin: JSON.stringify(later),
    });
    expect(again.stdout).toContain('unchanged');
    expect(JSON.parse((await rewind(cwd, ['conversation', 'show'])).stdout)).toEqual(later);

    const shown = JSON.parse((await rewind(cwd, ['conversation', 'show', 'base'])).stdout);
    expect(shown[2]).toMatchObject({ role: 'tool', tool_call_id: 'call_1' });
    expect(shown[3]).toMatchObject({ role: 'system' });

    await writeFile(join(cwd, 'a.txt'), 'two');
    const rolled = await rewind(cwd, [
      'rollback',
      'base',
      '--patch-note',
      'fixed',
      '--messages-out',
      'restored.json',
    ]);
    expect(rolled.code).toBe(0);
    expect(rolled.stdout).toMatch(
      /The restored conversation \(4 messages, openai-chat\) is in .*restored\.json\./,
    );
    const restored = JSON.parse(await readFile(join(cwd, 'restored.json'), 'utf8'));
    expect(restored).toEqual(
      shown
        .slice(0, 3)
        .concat([
          { role: 'system', content: expect.stringContaining('Patch applied since: fixed') },
        ]),
    );
    expect(await readFile(join(cwd, 'a.txt'), 'utf8')).toBe('one');
  });

  it('rolls back only the files or only the conversation, and keeps the current request unless told not to', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    await writeFile(join(cwd, 'a.txt'), 'one');
    const early = [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: 'went' },
    ];
    await writeFile(join(cwd, 'messages.json'), JSON.stringify(early));
    expect((await rewind(cwd, ['checkpoint', 'base', '--messages', 'messages.json'])).code).toBe(0);
    const later = [...early, { role: 'user', content: 'now the docs' }];
    await rewind(cwd, ['conversation', 'sync', '-'], { stdin: JSON.stringify(later) });
    await writeFile(join(cwd, 'a.txt'), 'two');

    expect((await rewind(cwd, ['rollback', 'base', '--scope', 'files'])).code).toBe(0);
    expect(await readFile(join(cwd, 'a.txt'), 'utf8')).toBe('one');
    expect(JSON.parse((await rewind(cwd, ['conversation', 'show'])).stdout)).toEqual(later);

    await writeFile(join(cwd, 'a.txt'), 'three');
    expect((await rewind(cwd, ['rollback', 'base', '--scope', 'conversation'])).code).toBe(0);
    expect(await readFile(join(cwd, 'a.txt'), 'utf8')).toBe('three');
    const restored = JSON.parse((await rewind(cwd, ['conversation', 'show'])).stdout);
    expect(restored.slice(0, 3)).toEqual(later);
    expect(restored[3]).toMatchObject({ role: 'system', content: expect.stringContaining('base') });

    await rewind(cwd, ['conversation', 'sync', '-'], { stdin: JSON.stringify(later) });
    await rewind(cwd, ['rollback', 'base', '--scope', 'conversation', '--no-keep-request']);
    const plain = JSON.parse((await rewind(cwd, ['conversation', 'show'])).stdout);
    expect(plain.slice(0, 2)).toEqual(early);
    expect(JSON.stringify(plain)).not.toContain('now the docs');
    const wrong = await rewind(cwd, ['rollback', 'base', '--scope', 'everything']);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toContain('both, files, conversation');
  });

  it('takes the conversation to sync as --messages FILE too, as checkpoint does, and refuses both or neither', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    const first = [{ role: 'user', content: 'go' }, call];
    await writeFile(join(cwd, 'messages.json'), JSON.stringify(first));
    // As a person types it: the `rewind` command itself.
    const typed = await runNode(
      [join(ROOT, 'bin/rewind.cjs'), 'conversation', 'sync', '--messages', 'messages.json'],
      { cwd, env: { REWIND_DAEMON: '0' } },
    );
    expect(typed).toMatchObject({
      code: 0,
      stdout: 'Recorded the conversation: 2 messages (openai-chat).\n',
      stderr: '',
    });
    expect(JSON.parse((await rewind(cwd, ['conversation', 'show'])).stdout)).toEqual(first);
    // `-` reads standard input, as FILE's does.
    const later = [...first, { role: 'tool', tool_call_id: 'call_1', content: 'ok' }];
    const piped = await rewind(cwd, ['conversation', 'sync', '--messages', '-'], {
      stdin: JSON.stringify(later),
    });
    expect(piped.stdout).toBe('Recorded the conversation: 3 messages (openai-chat).\n');
    expect(JSON.parse((await rewind(cwd, ['conversation', 'show'])).stdout)).toEqual(later);
    // One or the other, and one of them.
    const both = await rewind(cwd, ['conversation', 'sync', 'a.json', '--messages', 'b.json']);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain(
      'Give the conversation once: FILE (a.json) or --messages FILE (b.json), not both.',
    );
    const neither = await rewind(cwd, ['--json', 'conversation', 'sync', '--format', 'gemini']);
    expect(neither.code).toBe(2);
    expect(JSON.parse(neither.stdout)).toMatchObject({
      error: { code: 'USAGE', message: expect.stringContaining('FILE or --messages FILE') },
    });
    expect(JSON.parse((await rewind(cwd, ['conversation', 'show'])).stdout)).toEqual(later);
  });

  it('refuses what is not a conversation, with its code', async () => {
    const cwd = await makeTempDirectory();
    await rewind(cwd, ['init']);
    const notArray = await rewind(cwd, ['conversation', 'sync', '-'], { stdin: '{"role":"user"}' });
    expect(notArray.stderr).toContain('[CONVERSATION_FORMAT_UNKNOWN]');
    const notJson = await rewind(cwd, ['conversation', 'sync', '-'], { stdin: 'hello' });
    expect(notJson.stderr).toContain('[INVALID_ARGUMENT]');
    const mismatch = await rewind(cwd, ['conversation', 'sync', '-', '--format', 'gemini'], {
      stdin: '[{"role":"user","content":"x"}]',
    });
    expect(mismatch.stderr).toContain('[CONVERSATION_FORMAT_MISMATCH]');
    const none = await rewind(cwd, ['conversation', 'show']);
    expect(none.stderr).toContain('[CONVERSATION_NOT_FOUND]');
    expect(none.stderr).toContain('`rewind conversation sync`');
    expect((await rewind(cwd, ['conversation', 'sync', 'x.json', '--format', 'nope'])).code).toBe(
      2,
    );
  });
});
