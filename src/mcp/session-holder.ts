/**
 * The session an MCP server works in, opened on first use and kept for the server's life; an
 * isolated one that a person destroyed meanwhile is replaced by a new one.
 */
import { existsSync } from 'node:fs';
import type { Session } from '../index.js';

/**
 * Holds the session `open` opens: opened by the first call that needs it while the others wait,
 * and kept until {@link close}. A failure is not kept: the next call tries again. When the
 * session is isolated and its view is gone (a person ran `rewind destroy` on it while the server
 * ran), every call would fail until the server restarts: the next call closes it and works in
 * what `open` gives then (a new isolated session), and {@link takeNotice} says so, once.
 */
export class SessionHolder {
  readonly #open: () => Promise<Session>;
  #opened: Promise<Session> | undefined;
  #notice: string | undefined;

  constructor(open: () => Promise<Session>) {
    this.#open = open;
  }

  async session(): Promise<Session> {
    this.#opened ??= this.#kept(this.#open());
    const current = this.#opened;
    const session = await current;
    if (session.isolation !== 'isolated' || existsSync(session.workspace)) return session;
    // Calls that find it gone at once share one replacement.
    if (this.#opened === current) this.#opened = this.#kept(this.#replace(session));
    return this.#opened;
  }

  async #replace(gone: Session): Promise<Session> {
    await gone.close().catch(() => {});
    const next = await this.#open();
    this.#notice =
      `The isolated session ${gone.id} this server worked in was destroyed (\`rewind destroy\`), and its view with it. ` +
      `This call and the next ones work in a new isolated session, ${next.id}: a fresh copy of the workspace as it is now, ` +
      `without what was written in ${gone.id} and not committed (\`rewind log --session ${gone.id}\` lists it).`;
    return next;
  }

  /** `opening`, forgotten when it fails, so that the next call opens again. */
  #kept(opening: Promise<Session>): Promise<Session> {
    const kept: Promise<Session> = opening.catch((error: unknown) => {
      if (this.#opened === kept) this.#opened = undefined;
      throw error;
    });
    return kept;
  }

  /** What a call should tell first since the session was replaced, once; else undefined. */
  takeNotice(): string | undefined {
    const notice = this.#notice;
    this.#notice = undefined;
    return notice;
  }

  /** Closes the session, if one was opened; the next call opens another. */
  async close(): Promise<void> {
    const closing = this.#opened;
    this.#opened = undefined;
    await (await closing?.catch(() => undefined))?.close();
  }
}
