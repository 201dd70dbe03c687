import { execFile } from 'node:child_process';
import { mkdir, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client, InMemoryTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { createMcpServer } from '../../src/mcp/server.js';
import { runProcess } from '../../src/sandbox/index.js';
import { adversarialJson, RUNS, trickyString, withinBound } from '../helpers/fuzz.js';
import { AS_NOBODY, type Jail, makeJail } from '../helpers/jail.js';
import { ROOT } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';

const execFileAsync = promisify(execFile);

/**
 * Tool calls with arguments of every wrong shape through the real MCP server: `rewind mcp` over
 * stdio, built, run as the unprivileged user when the tests run as root, in a workspace that a
 * failed path check cannot leave (test/helpers/jail.ts). Every call answers with a message for a
 * model (a result, or an error saying what is wrong), never a stack trace, an "Unexpected
 * error", a dead server or a hang.
 */

interface Schema {
  type?: string;
  enum?: unknown[];
  anyOf?: Schema[];
  items?: Schema;
  properties?: Record<string, Schema>;
  required?: string[];
}

interface Tool {
  name: string;
  inputSchema: Schema;
}

/** Tools that run a command or send a request: those arguments only from fixed, harmless lists. */
const COMMAND = fc.constantFrom('true', 'echo hi', 'false', ['true'], ['echo', 'x'], '', ['']);
const ODD_URL = fc.constantFrom(
  'http://127.0.0.1:1/',
  'not a url',
  'file:///etc/passwd',
  'http://[::1',
  'gopher://127.0.0.1:1/',
  'http://169.254.169.254/latest',
  '',
);
const SPECIAL: Record<string, fc.Arbitrary<unknown>> = {
  command: COMMAND,
  verifier: COMMAND.filter((command) => typeof command === 'string'),
  url: ODD_URL,
  compensateCommand: fc.constantFrom('true', ''),
  // Each retry of an unknown verdict waits a second: a few, and the ones refused.
  retries: fc.constantFrom(0, 1, -1, 101, 1.5, 2 ** 53),
};

/** Paths a model may name: in the workspace, out of it, through a link, odd in every way. */
const path = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      'a.txt',
      'src/main.ts',
      'src',
      'dir',
      'new.txt',
      'dir/new/deep.txt',
      '.',
      '',
      '..',
      '../outside/secret.txt',
      'link-out/secret.txt',
      'link-out',
      '/etc/passwd',
      '.rewind',
      '.rewind/rewind.json',
      '.git/config',
      'a/../../outside/x',
      'src/../a.txt',
      'a.txt/child',
      '~/x',
      '%2e%2e/x',
      'a\0b',
      'a\nb',
      `${'x'.repeat(300)}.txt`,
      `${'d/'.repeat(2_100)}f`,
    ),
  },
  { weight: 2, arbitrary: trickyString(['a.txt', 'src', 'dir', '..', '.rewind']) },
);

/** Deep JSON, but no deeper than a client can still write out. */
const deep = fc
  .record({ depth: fc.integer({ min: 500, max: 3_000 }), open: fc.constantFrom('[', '{"a":') })
  .map(({ depth, open }) =>
    JSON.parse(`${open.repeat(depth)}0${(open === '[' ? ']' : '}').repeat(depth)}`),
  );

/** A value of the wrong type for any field. */
const hostile = fc.oneof(
  fc.constantFrom(null, true, 0, -1, 1.5, 1e308, -0, 2 ** 53, [], {}, [1], { toString: 1 }),
  trickyString(),
  deep,
  adversarialJson().filter((value) => {
    try {
      JSON.stringify(value);
      return true;
    } catch {
      return false;
    }
  }),
);

/** A value that fits `schema` (roughly: the server checks the rest), or one that does not. */
function fittingValue(name: string, schema: Schema): fc.Arbitrary<unknown> {
  const special = SPECIAL[name];
  if (special) return special;
  if (schema.enum) return fc.constantFrom(...schema.enum);
  if (schema.anyOf) return fc.oneof(...schema.anyOf.map((option) => fittingValue(name, option)));
  switch (schema.type) {
    case 'string':
      return ['path', 'from', 'to'].includes(name)
        ? path
        : trickyString(['start', 'latest', 'a.txt', '1', '2', 'GET', 'unlimited', '1GiB']);
    case 'integer':
    case 'number':
      return fc.oneof(
        fc.integer({ min: 1, max: 40 }),
        fc.constantFrom(0, -1, 0.5, 1e-9, 2 ** 53 - 1, 1e308),
      );
    case 'boolean':
      return fc.boolean();
    case 'array':
      return fc.array(schema.items?.type ? fittingValue(name, schema.items) : hostileMessage, {
        maxLength: 4,
      });
    case 'object':
      return fc.dictionary(trickyString(), trickyString(), { maxKeys: 4 });
    default:
      return hostile;
  }
}

/** Conversation messages: real ones, and anything at all. */
const hostileMessage = fc.oneof(
  fc.constantFrom(
    { role: 'user', content: 'hi' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'c1', function: { name: 'x' } }] },
    { role: 'tool', tool_call_id: 'c1', content: 'ok' },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't' }] },
  ),
  hostile,
);

/** Arguments for `tool`: each field absent, fitting or hostile; now and then not an object. */
function argumentsOf(tool: Tool): fc.Arbitrary<unknown> {
  const properties = Object.entries(tool.inputSchema.properties ?? {});
  const required = new Set(tool.inputSchema.required ?? []);
  const fields = properties.map(([name, schema]) =>
    fc
      .oneof(
        { weight: required.has(name) ? 1 : 4, arbitrary: fc.constant(undefined) },
        // Mostly fitting, so that calls get past the schema into the library.
        { weight: 12, arbitrary: fittingValue(name, schema) },
        { weight: 1, arbitrary: hostile },
      )
      .map((value) => [name, value] as const),
  );
  return fc.oneof(
    {
      weight: 12,
      arbitrary: fc
        .tuple(...fields, fc.option(fc.tuple(trickyString(), hostile), { nil: undefined }))
        .map((members) => {
          const object: Record<string, unknown> = {};
          for (const member of members) {
            if (member === undefined) continue;
            const [name, value] = member as readonly [string, unknown];
            if (value !== undefined) object[name] = value;
          }
          return object;
        }),
    },
    { weight: 1, arbitrary: hostile },
  );
}

type CallResult = { content?: { type: string; text?: string }[]; isError?: boolean };

/** What a model reads of a result, or of the error the client was given. */
function textOf(outcome: { result?: unknown; error?: unknown }): string {
  if (outcome.error !== undefined) {
    return outcome.error instanceof Error ? outcome.error.message : String(outcome.error);
  }
  return ((outcome.result as CallResult).content ?? []).map((part) => part.text ?? '').join('');
}

let jail: Jail;
let client: Client;
let tools: Tool[] = [];
let stderr = '';

beforeAll(async () => {
  jail = await makeJail('rewind-fuzz-mcp-');
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [
      AS_NOBODY,
      join(ROOT, 'bin', 'rewind.cjs'),
      'mcp',
      '--root',
      jail.workspace,
      '--sandbox',
      'none',
    ],
    stderr: 'pipe',
  });
  transport.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  client = new Client({ name: 'fuzz', version: '1.0.0' });
  await client.connect(transport);
  tools = (await client.listTools()).tools as Tool[];
  await client.callTool({ name: 'checkpoint', arguments: { label: 'start' } });
}, 30_000);

afterAll(async () => {
  await client?.close();
  await jail?.remove();
});

describe('fuzzing the MCP server', () => {
  it('answers every tool call with a message for a model, never a stack trace, a crash or a hang', async () => {
    const call = fc.constantFrom(...tools.map((tool) => tool.name)).chain((name) =>
      argumentsOf(tools.find((tool) => tool.name === name) as Tool).map((args) => ({
        name,
        args,
      })),
    );
    await fc.assert(
      fc.asyncProperty(call, async ({ name, args }) => {
        const said = stderr.length;
        const outcome = await withinBound(
          () =>
            client
              .callTool({ name, arguments: args as Record<string, unknown> }, { timeout: 20_000 })
              .then(
                (result) => ({ result }),
                (error: unknown) => ({ error }),
              ),
          20_000,
        );
        const text = textOf(outcome);
        const warnings = stderr.slice(said);
        const shown = `${name} ${JSON.stringify(args)?.slice(0, 300)}:\n${text.slice(0, 2_000)}\n${warnings}`;
        expect(text.trim(), shown).not.toBe('');
        expect(text, shown).not.toMatch(/Unexpected error|^\s+at .+:\d+:\d+\)?$/m);
        // The server says nothing on stderr: no warning (a timer cut to 1 ms), no crash.
        expect(warnings, shown).toBe('');
      }),
      { numRuns: RUNS.normal },
    );
    // The server is alive and its store whole; nothing reached beside the workspace.
    const status = await client.callTool({ name: 'verify', arguments: {} });
    expect(textOf({ result: status })).not.toMatch(/Unexpected error/);
    await jail.expectOutsideUntouched();
  });
});

describe('what fuzzing the MCP server found', () => {
  async function connected(): Promise<{ client: Client; workspace: string }> {
    const workspace = await makeTempDirectory();
    await mkdir(join(workspace, 'dir'));
    const server = createMcpServer({ root: workspace, session: { sandbox: 'none' } });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const inMemory = new Client({ name: 'found', version: '1.0.0' });
    await inMemory.connect(clientSide);
    onTestFinished(() => inMemory.close());
    return { client: inMemory, workspace };
  }
  const call = async (on: Client, name: string, args: Record<string, unknown>) =>
    textOf({ result: await on.callTool({ name, arguments: args }) });

  it('refuses a name longer than the system takes as PATH_INVALID, not ENAMETOOLONG', async () => {
    const { client: on } = await connected();
    expect(await call(on, 'write', { path: `${'x'.repeat(300)}.txt`, content: 'x' })).toMatch(
      /holds a name of 304 bytes, longer than the 255 the system takes.*\[PATH_INVALID\]/,
    );
    expect(await call(on, 'mkdir', { path: `${'d/'.repeat(2_100)}f` })).toMatch(
      /longer than the 4095 the system takes.*\[PATH_INVALID\]/,
    );
  });

  it('refuses a path that is not valid Unicode, which the system would take as another name', async () => {
    const { client: on, workspace } = await connected();
    expect(await call(on, 'write', { path: 'a\ud800', content: 'x' })).toMatch(
      /is not valid Unicode \(it holds a lone surrogate\).*\[PATH_INVALID\]/,
    );
    expect(await readdir(workspace)).not.toContain('a\ufffd');
    expect(await call(on, 'write', { path: 'ok-😀.txt', content: '' })).toMatch(/rewind undo/);
    expect(await call(on, 'read', { path: 'ok-😀.txt' })).toBe('(ok-😀.txt is empty)');
    // A lone U+DC80..U+DCFF stands for a byte that is not UTF-8: the name gets that byte.
    expect(await call(on, 'write', { path: 'b\udcff.t', content: 'raw' })).toMatch(/rewind undo/);
    const names = await readdir(workspace, { encoding: 'buffer' });
    expect(names.map((name) => name.toString('hex'))).toContain(
      Buffer.from([0x62, 0xff, 0x2e, 0x74]).toString('hex'),
    );
  });

  it('refuses to read a directory or a named pipe as PATH_CONFLICT, instead of EISDIR or waiting forever', async () => {
    const { client: on, workspace } = await connected();
    expect(await call(on, 'read', { path: 'dir' })).toMatch(
      /dir is a directory, not a file, so there is no text to read\. List it instead\. \[PATH_CONFLICT\]/,
    );
    await execFileAsync('mkfifo', [join(workspace, 'pipe')]);
    expect(await withinBound(() => call(on, 'read', { path: 'pipe' }), 5_000)).toMatch(
      /pipe is a named pipe, not a file.*\[PATH_CONFLICT\]/,
    );
  });

  it('says there are no entries when a log filter matches none, instead of an empty answer', async () => {
    const { client: on } = await connected();
    expect(await call(on, 'log', { kind: 'escalation' })).toMatch(
      /^no entries of kind "escalation" in session \w+$/,
    );
    // A kind no entry can have is a mistake to say, not an empty answer.
    expect(await call(on, 'log', { kind: 'nothing-matches' })).toMatch(
      /No entry is of kind "nothing-matches"\. Give a kind or its first word \(session, /,
    );
  });

  it('refuses a timeout a timer cannot wait and retries that would run for days, instead of ending the command after 1 ms', async () => {
    const { client: on } = await connected();
    expect(await call(on, 'exec', { command: 'true', timeout: 2 ** 53 })).toMatch(
      /timeout: must be at most 2,147,483 seconds \(24 days\)/,
    );
    expect(await call(on, 'test', { verifier: 'true', retries: 101 })).toMatch(
      /retries: must be a whole number from 0 to 100/,
    );
    // The library waits as long as a timer can: the command runs to its end.
    const run = await runProcess(['sh', '-c', 'sleep 0.2; echo done'], {
      cwd: tmpdir(),
      timeoutMs: 2 ** 53,
    });
    expect({ timedOut: run.timedOut, stdout: run.stdout.toString() }).toEqual({
      timedOut: false,
      stdout: 'done\n',
    });
  });
});
