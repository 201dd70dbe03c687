import { join } from 'node:path';
import { isSystemError, RewindError } from '../errors.js';
import { REDACTION_LOOKAHEAD_BYTES, readPlainFile } from '../lib/index.js';
import { DEFAULT_MAX_OUTPUT_BYTES } from '../sandbox/index.js';
import { runVerifier, type VerificationResult, type VerifierConfig } from '../verifier/index.js';
import { redactCapped } from './actions/journaled-spec.js';
import { refuseNulIn, type SessionContext, sandboxFor, snapshotWorkspace } from './context.js';
import { withWorkspaceLock } from './journal/journal.js';

/**
 * The verifier this session runs: `.rewind/config.json`'s `verifier` (`command`, `retries`,
 * `retryDelayMs`, `timeoutMs`), unless one is given. Undefined when there is none. Throws
 * `INVALID_ARGUMENT` for a config file that is not JSON.
 */
async function readVerifierConfig(
  context: SessionContext,
  given: VerifierConfig | undefined,
): Promise<VerifierConfig | undefined> {
  if (given) return given;
  let text: string;
  try {
    const read = await readPlainFile(join(context.storeDirectory, 'config.json'));
    if (!read.isFile) {
      throw new RewindError(
        'INVALID_ARGUMENT',
        `.rewind/config.json is ${read.kind}, not a file. Move it aside, or pass the verifier explicitly.`,
        { data: { kind: read.kind } },
      );
    }
    text = read.value.toString('utf8');
  } catch (error) {
    if (isSystemError(error, 'ENOENT')) return undefined;
    throw error;
  }
  let config: { verifier?: VerifierConfig };
  try {
    config = JSON.parse(text);
  } catch (error) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      `.rewind/config.json is not JSON (${(error as Error).message}). Fix it, or pass the verifier explicitly.`,
      { cause: error },
    );
  }
  return config.verifier;
}

/**
 * Runs the verifier in the session's workspace, through its sandbox, and journals the verdict
 * with the output as evidence; see `Session.test`. Throws `INVALID_ARGUMENT` when no verifier is
 * configured or given, or its command holds a NUL byte.
 */
export async function runVerification(
  context: SessionContext,
  given: VerifierConfig | undefined,
): Promise<VerificationResult & { id: number }> {
  const config = await readVerifierConfig(context, given);
  if (
    !config ||
    (typeof config.command === 'string'
      ? config.command.trim() === ''
      : config.command.length === 0)
  ) {
    throw new RewindError(
      'INVALID_ARGUMENT',
      'No verifier is configured. Pass one (`rewind test --verifier CMD`), or set "verifier": {"command": "..."} in .rewind/config.json. It must print {"status": "pass" | "fail" | "unknown"} on stdout.',
    );
  }
  refuseNulIn(config.command, "The verifier's command");
  return withWorkspaceLock(context, 'running the verifier', async (journal) => {
    // The files the verdict is about, so that an automatic rollback can tell the checkpoints a
    // verifier passed from those it failed. Only worth a snapshot when there is a checkpoint to
    // compare with; a workspace that cannot be read whole is judged without one.
    const judged =
      journal.checkpoints().length > 0
        ? await snapshotWorkspace(context).then(
            (snapshot) => (snapshot.unreadable.length === 0 ? snapshot.tree : undefined),
            () => undefined,
          )
        : undefined;
    const sandbox = sandboxFor(context);
    const result = await runVerifier(config, async (command, timeoutMs) => {
      // Read past the cap, so that a secret the cap cuts is redacted whole, not stored in part.
      const run = await sandbox.run(command, {
        cwd: context.workspace,
        timeoutMs,
        maxOutputBytes: DEFAULT_MAX_OUTPUT_BYTES + REDACTION_LOOKAHEAD_BYTES,
      });
      return {
        stdout: run.stdout.toString('utf8'),
        stderr: run.stderr.toString('utf8'),
        exitCode: run.exitCode,
        timedOut: run.timedOut,
      };
    });
    const redactor = context.redactor;
    const last = result.attempts.at(-1);
    const batch = context.store.batch();
    const cap = DEFAULT_MAX_OUTPUT_BYTES;
    const stdout = await batch.put(
      redactCapped(redactor, Buffer.from(last?.stdout ?? ''), cap).bytes,
    );
    const stderr = await batch.put(
      redactCapped(redactor, Buffer.from(last?.stderr ?? ''), cap).bytes,
    );
    await batch.commit();
    const command = typeof config.command === 'string' ? config.command : config.command.join(' ');
    const entry = await journal.append(
      'verification-recorded',
      {
        status: result.status,
        ...(result.summary !== undefined && { summary: redactor.text(result.summary).text }),
        errors: result.errors.map((error) => redactor.text(error).text),
        ...(result.notes !== undefined && { notes: result.notes }),
        command: redactor.text(command).text,
        attempts: result.attempts.map((attempt) => ({
          status: attempt.status,
          exitCode: attempt.exitCode,
        })),
        evidence: { stdout, stderr, sandbox: sandbox.backend },
        ...(judged !== undefined && { tree: judged }),
      },
      [
        { type: 'blob', digest: stdout.digest },
        { type: 'blob', digest: stderr.digest },
        ...(judged !== undefined ? [{ type: 'tree' as const, digest: judged }] : []),
      ],
    );
    return { ...result, id: entry.seq };
  });
}
