import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Client, InMemoryTransport } from '@modelcontextprotocol/client';
import { Argument, type Command } from 'commander';
import { afterEach, describe, expect, it } from 'vitest';
import { createProgram } from '../../src/cli/main.js';
import { inputsOf, whyOutsideTable } from '../../src/cli/options.js';
import { createMcpServer } from '../../src/mcp/server.js';
import { type AnyOperation, OPERATIONS } from '../../src/operations/index.js';
import { ROOT } from '../helpers/processes.js';
import { makeTempDirectory } from '../helpers/temp.js';

const operations: readonly AnyOperation[] = OPERATIONS;
const onCli = operations.filter((operation) => operation.excludedFrom?.cli === undefined);
const onMcp = operations.filter((operation) => operation.excludedFrom?.mcp === undefined);
const keysOf = (operation: AnyOperation): string[] => Object.keys(operation.input.shape).sort();

const clients: Client[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()));
});

/** Every command of the program that runs something, by its operation name (`conversation-sync`). */
function commandsOf(program: Command): Map<string, Command> {
  const commands = new Map<string, Command>();
  for (const command of program.commands) {
    if (command.commands.length === 0) commands.set(command.name(), command);
    for (const sub of command.commands) commands.set(`${command.name()}-${sub.name()}`, sub);
  }
  return commands;
}

/** Every command of the program, and those of them built from no operation (`mcp`), which must say why. */
function programCommands(): Map<string, Command> {
  return commandsOf(createProgram({ cwd: ROOT, stdout: () => {}, stderr: () => {} }));
}

function commandsOutsideTable(): string[] {
  return [...programCommands()]
    .filter(([, command]) => whyOutsideTable(command))
    .map(([name]) => name);
}

describe('the operation table and the surfaces built from it', () => {
  it('names every operation once, in kebab case, and gives every exclusion a reason', () => {
    const names = operations.map((operation) => operation.name);
    expect(new Set(names).size).toBe(names.length);
    for (const operation of operations) {
      expect(operation.name).toMatch(/^[a-z][a-z-]*$/);
      for (const text of [operation.title, operation.summary, operation.description]) {
        expect(text.trim(), operation.name).not.toBe('');
      }
      for (const reason of Object.values(operation.excludedFrom ?? {})) {
        expect(reason.trim(), operation.name).not.toBe('');
      }
    }
  });

  it('serves exactly the operations MCP does not leave out, each as its row says', async () => {
    const server = createMcpServer({ root: await makeTempDirectory() });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const client = new Client({ name: 'drift', version: '1.0.0' });
    await client.connect(clientSide);
    clients.push(client);
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual(
      onMcp.map((operation) => operation.name).sort(),
    );
    for (const operation of onMcp) {
      const tool = tools.find((listed) => listed.name === operation.name);
      expect(tool, operation.name).toMatchObject({
        title: operation.title,
        description: operation.description,
      });
      expect(Object.keys(tool?.inputSchema.properties ?? {}).sort(), operation.name).toEqual(
        keysOf(operation),
      );
    }
  });

  it('has exactly the commands the CLI does not leave out, each described by its summary', () => {
    const commands = programCommands();
    const outside = commandsOutsideTable();
    // Outside the table: the MCP server and the web UI, which the CLI only lists and hands on,
    // the Claude Code hook, an edge of its own that speaks Claude Code's hook protocol, and the
    // daemon, which serves the CLI's own commands to other `rewind` processes.
    expect(outside).toEqual(['mcp', 'ui', 'hook-claude-code', 'daemon']);
    for (const name of outside)
      expect(whyOutsideTable(commands.get(name) as Command)?.trim()).not.toBe('');
    expect([...commands.keys()].filter((name) => !outside.includes(name)).sort()).toEqual(
      onCli.map((operation) => operation.name).sort(),
    );
    for (const operation of onCli) {
      expect(commands.get(operation.name)?.description(), operation.name).toBe(operation.summary);
    }
  });

  it("feeds each input key of a command's operation from exactly one argument or option", () => {
    const commands = programCommands();
    for (const operation of onCli) {
      const command = commands.get(operation.name) as Command;
      const inputs = inputsOf(command);
      expect(inputs?.operation, operation.name).toBe(operation);
      if (!inputs) continue;
      expect([...inputs.feeders.keys()].sort(), operation.name).toEqual(keysOf(operation));
      for (const reason of inputs.cliOnly.values()) expect(reason.trim()).not.toBe('');
      // Nothing on the command line is outside the registry: a flag added by hand would drift.
      const declared = [...command.registeredArguments, ...command.options];
      const accounted = [
        ...inputs.feeders.values(),
        ...inputs.alternatives.keys(),
        ...inputs.cliOnly.keys(),
      ];
      for (const key of inputs.alternatives.values()) {
        expect(inputs.feeders.has(key), `${operation.name}: ${key}`).toBe(true);
      }
      const shared = command.options.filter((option) => option.long === '--session');
      expect(shared.length, operation.name).toBe(operation.scope === 'session' ? 1 : 0);
      const unaccounted = declared.filter(
        (input) => !accounted.includes(input) && !shared.includes(input as never),
      );
      expect(
        unaccounted.map((input) => (input instanceof Argument ? input.name() : input.flags)),
        operation.name,
      ).toEqual([]);
      for (const input of accounted) expect(declared, operation.name).toContain(input);
    }
  });

  it('documents exactly the CLI commands in docs/cli.md', async () => {
    const text = await readFile(join(ROOT, 'docs', 'cli.md'), 'utf8');
    const documented = [...text.matchAll(/^### `rewind ([a-z][a-z-]*(?: [a-z][a-z-]*)*)/gm)].map(
      (match) => (match[1] as string).replace(/ /g, '-'),
    );
    expect(documented.sort()).toEqual(
      [...onCli.map((operation) => operation.name), ...commandsOutsideTable()].sort(),
    );
  });
});
