// The page of `rewind ui`: the timeline of a workspace's sessions, what each entry changed, and
// the actions a person may take (each the same operation as the CLI's, each confirmed first).
// Bundled with its libraries by scripts/bundle.mjs into dist/ui-assets/; nothing loads from
// elsewhere at run time.
import { html as renderDiffHtml } from 'diff2html';
import htm from 'htm';
import { createContext, h, render } from 'preact';
import { useCallback, useContext, useEffect, useMemo, useState } from 'preact/hooks';
import {
  actionStateOf,
  createGate,
  moveCursor,
  plural,
  prunedCheckpoints,
  storedBody,
} from './state.js';

const html = htm.bind(h);

/** Calls the server; an error answer becomes an Error carrying its code and data. */
async function api(path, options = {}) {
  const response = await fetch(path, { credentials: 'same-origin', ...options });
  const body = await response.json();
  if (body.error) throw Object.assign(new Error(body.error.message), body.error);
  return body.output;
}
const read = (name, params = {}) =>
  api(
    `/api/read/${name}?${new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined))}`,
  );
const act = (name, session, input) =>
  api(`/api/action/${name}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ session, input }),
  });

/** The kinds of entries, by the family the filter shows. */
const FAMILIES = {
  checkpoints: ['checkpoint-created', 'checkpoint-pruned'],
  actions: ['action-started', 'action-approved', 'action-discarded'],
  rollbacks: ['rollback-started', 'rollback-skipped', 'rollback-failed'],
  undos: ['undo-started', 'undo-failed'],
  refusals: ['undo-refused', 'commit-refused'],
  verifications: ['verification-recorded', 'escalation-resolved'],
  conversation: ['conversation-synced'],
  session: [
    'session-started',
    'settings-tightened',
    'view-created',
    'session-destroyed',
    'note-added',
  ],
  closings: ['action-completed', 'action-failed', 'rollback-completed', 'undo-completed'],
};
const familyOf = (kind) =>
  Object.keys(FAMILIES).find((family) => FAMILIES[family].includes(kind)) ?? 'session';

/**
 * The page's actions run one at a time (a double click, or a second button pressed while one
 * runs, starts nothing): `running` names the one running, `run(name, task)` starts one, `ask`
 * asks for confirmation first; each answers undefined when another runs.
 */
const Requests = createContext(undefined);

function useRequests() {
  const requests = useContext(Requests);
  return { ...requests, isBusy: requests.running !== undefined };
}

function App() {
  const [workspace, setWorkspace] = useState('');
  const [sessions, setSessions] = useState([]);
  const [session, setSession] = useState(undefined);
  const [entries, setEntries] = useState([]);
  // The action a live process runs in the session now, if any (`running` of the log's session).
  const [runningAction, setRunningAction] = useState(undefined);
  const [checkpoints, setCheckpoints] = useState([]);
  // What the checkpoint list says could not be done: line counts an object missing or damaged
  // in the store keeps from being made (the checkpoints are listed all the same).
  const [warnings, setWarnings] = useState([]);
  const [hidden, setHidden] = useState(new Set(['closings']));
  const [selected, setSelected] = useState(undefined);
  // The option of the timeline the keyboard is on (aria-selected); Enter opens it.
  const [cursor, setCursor] = useState(undefined);
  // A read that failed, by what it read (workspace, sessions, log, checkpoints): each goes when that read
  // succeeds again, as once the server can be reached again.
  const [problems, setProblems] = useState({});
  const problemOf = useCallback(
    (source) => (error) => setProblems((all) => ({ ...all, [source]: error })),
    [],
  );
  const clearProblem = useCallback(
    (source) =>
      setProblems((all) => (all[source] === undefined ? all : { ...all, [source]: undefined })),
    [],
  );
  const problem = Object.values(problems).find(Boolean);
  // What keeps the page from following the ledgers, if anything: the server gone, or unable to
  // read them (its `problem` event).
  const [connection, setConnection] = useState(undefined);
  const [version, setVersion] = useState(0);
  const [running, setRunning] = useState(undefined);
  const gate = useMemo(() => createGate(setRunning), []);
  const requests = useMemo(
    () => ({
      running,
      run: gate.run,
      ask: (name, question, task) =>
        gate.running === undefined && window.confirm(question) ? gate.run(name, task) : undefined,
    }),
    [running, gate],
  );

  useEffect(() => {
    api('/api/workspace').then((output) => {
      clearProblem('workspace');
      setWorkspace(output.workspace);
    }, problemOf('workspace'));
  }, []);
  // New entries arrive without a reload: the server says when a ledger grew, or why it cannot
  // read them. The browser retries a lost stream by itself; the next `ledger` event ends the
  // banner (and rereads what may have changed meanwhile).
  useEffect(() => {
    const events = new EventSource('/api/events');
    events.addEventListener('ledger', () => {
      setConnection(undefined);
      setVersion((value) => value + 1);
    });
    events.addEventListener('problem', (event) => {
      let message = event.data;
      try {
        message = JSON.parse(event.data).message;
      } catch {}
      setConnection(
        `rewind ui cannot read the ledgers: ${message} The page shows them as they were; it follows them again once they can be read.`,
      );
    });
    events.addEventListener('error', () =>
      setConnection(
        events.readyState === EventSource.CLOSED
          ? 'Disconnected: rewind ui refused the page (was it started again?). Open the address it printed.'
          : 'Disconnected: rewind ui has ended or cannot be reached, so the page no longer follows the ledgers and its buttons cannot act. Start rewind ui again and open the address it prints.',
      ),
    );
    return () => events.close();
  }, []);
  useEffect(() => {
    read('sessions').then((output) => {
      clearProblem('sessions');
      setSessions(output.sessions);
      setSession((current) => current ?? output.currentSession ?? output.sessions.at(-1)?.id);
    }, problemOf('sessions'));
  }, [version]);
  // An answer for a session no longer shown (or overtaken by a newer read) is dropped: answers
  // can arrive out of order, and a late one would show another session's timeline.
  useEffect(() => {
    if (session === undefined) return;
    let isLive = true;
    const keep = (set) => (value) => isLive && set(value);
    read('log', { session }).then(
      keep((output) => {
        clearProblem('log');
        setEntries(output.entries);
        setRunningAction(output.session.running);
      }),
      keep(problemOf('log')),
    );
    read('checkpoints', { session }).then(
      keep((output) => {
        clearProblem('checkpoints');
        setCheckpoints(output.checkpoints);
        setWarnings(output.warnings);
      }),
      // Not known (rather than none): a checkpoint's detail then says so, and the read error shows.
      keep((error) => {
        problemOf('checkpoints')(error);
        setCheckpoints(undefined);
        setWarnings([]);
      }),
    );
    return () => {
      isLive = false;
    };
  }, [session, version]);

  const shown = entries.filter((line) => !hidden.has(familyOf(line.kind)));
  const pruned = prunedCheckpoints(entries);
  const toggle = (family) => {
    const next = new Set(hidden);
    if (next.has(family)) next.delete(family);
    else next.add(family);
    setHidden(next);
  };
  const current = sessions.find((item) => item.id === session);
  const line = entries.find((item) => item.seq === selected);
  const refresh = useCallback(() => setVersion((value) => value + 1), []);
  useEffect(() => {
    if (cursor !== undefined)
      document.getElementById(`entry-${cursor}`)?.scrollIntoView({ block: 'nearest' });
  }, [cursor]);
  const onKeyDown = (event) => {
    if (event.key === 'Enter' || event.key === ' ') {
      if (cursor === undefined) return;
      event.preventDefault();
      setSelected(cursor);
      return;
    }
    const next = moveCursor(
      shown.map((item) => item.seq),
      cursor,
      event.key,
    );
    if (next === undefined) return;
    event.preventDefault();
    setCursor(next);
  };
  return html`<${Requests.Provider} value=${requests}>
    <header>
      <h1>Rewind</h1>
      <span class="workspace" title="workspace">${workspace}</span>
      <label>
        Session
        <select
          aria-label="session"
          value=${session}
          onChange=${(event) => {
            setSession(event.target.value);
            setSelected(undefined);
            setCursor(undefined);
          }}
        >
          ${sessions.map(
            (item) =>
              html`<option value=${item.id}>
                ${item.id}${item.isCurrent ? ' (current)' : ''} · ${item.isolation} ·
                ${item.entryCount} entries
              </option>`,
          )}
        </select>
      </label>
      ${
        current?.isolation === 'isolated' &&
        // Keyed by session: a plan shown is the plan of the session it was asked for.
        html`<${CommitButton} key=${session} session=${session} onDone=${refresh} />`
      }
      <span class="busy" aria-live="polite">${running && `Running ${running}…`}</span>
    </header>
    ${connection && html`<p class="banner" role="alert">${connection}</p>`}
    ${problem && html`<p class="problem" role="alert">${problem.message}</p>`}
    ${warnings.map((warning) => html`<p class="warning" role="status">Warning: ${warning}</p>`)}
    <nav class="filters" aria-label="filter by kind">
      ${Object.keys(FAMILIES).map(
        (family) =>
          html`<button
            class=${hidden.has(family) ? 'chip off' : 'chip on'}
            aria-pressed=${!hidden.has(family)}
            onClick=${() => toggle(family)}
          >
            ${family}
          </button>`,
      )}
    </nav>
    <main>
      <ol
        class="timeline"
        role="listbox"
        aria-label="timeline"
        tabindex="0"
        aria-activedescendant=${cursor !== undefined && shown.some((item) => item.seq === cursor) ? `entry-${cursor}` : undefined}
        onKeyDown=${onKeyDown}
      >
        ${shown.map(
          (item) => html`<li
            role="option"
            id=${`entry-${item.seq}`}
            aria-selected=${item.seq === cursor ? 'true' : 'false'}
            class=${`entry family-${familyOf(item.kind)}${item.seq === selected ? ' selected' : ''}${item.seq === cursor ? ' active' : ''}${pruned.has(item.seq) ? ' pruned' : ''}`}
            data-seq=${item.seq}
            data-kind=${item.kind}
            onClick=${() => {
              setCursor(item.seq);
              setSelected(item.seq);
            }}
          >
            <span class="seq">#${item.seq}</span>
            <span class="kind">${item.kind}</span>
            <time datetime=${item.at} title=${item.at}>
              ${new Date(item.at).toLocaleTimeString([], { hour12: false })}
            </time>
            ${item.action && html`<${ActionState} line=${item} running=${runningAction} />`}
            ${pruned.has(item.seq) && html`<span class="badge" title="its files are no longer kept">pruned</span>`}
            <span class="summary">${item.summary}</span>
          </li>`,
        )}
      </ol>
      <section class="detail" aria-label="detail">
        ${
          line
            ? html`<${Detail}
              key=${`${session}:${line.seq}`}
              session=${session}
              line=${line}
              running=${runningAction}
              isPruned=${pruned.has(line.seq)}
              checkpoints=${checkpoints}
              onDone=${refresh}
            />`
            : html`<p class="hint">Pick an entry of the timeline to see what it changed.</p>`
        }
      </section>
    </main>
  <//>`;
}

/** An action's class and state: a command still running says so, with its process. */
function ActionState({ line, running }) {
  const { state, pid } = actionStateOf(line, running);
  return html`<span class=${`state state-${state}`}>
    ${line.action.class} · ${state}${pid !== undefined ? ` (pid ${pid})` : ''}
  </span>`;
}

/** What one entry recorded, and what can be done about it. */
function Detail({ session, line, running, isPruned, checkpoints, onDone }) {
  const { entry } = line;
  const body = entry.body;
  return html`
    <h2>#${line.seq} ${line.kind}</h2>
    <p class="summary">${line.summary}</p>
    ${
      line.kind === 'checkpoint-created' &&
      (isPruned
        ? html`<p class="hint pruned">
            This checkpoint was pruned: its files are no longer kept, so it cannot be rolled back
            to or compared.
          </p>`
        : html`<${CheckpointDetail}
      session=${session}
      seq=${line.seq}
      label=${body.label}
      checkpoints=${checkpoints}
      body=${body}
      onDone=${onDone}
    />`)
    }
    ${
      line.action &&
      html`<${ActionDetail} session=${session} line=${line} running=${running} onDone=${onDone} />`
    }
    ${
      (line.kind === 'undo-refused' || line.kind === 'commit-refused') &&
      html`<${Refusal} body=${body} />`
    }
    ${
      line.kind === 'verification-recorded' &&
      html`<p class=${`verdict ${body.status}`}>Verdict: ${body.status}</p>
      <pre>${[body.summary, ...(body.errors ?? []), ...[body.notes ?? []].flat()].filter(Boolean).join('\n')}</pre>`
    }
    <details>
      <summary>The ledger entry</summary>
      <pre>${JSON.stringify(entry, null, 2)}</pre>
    </details>
  `;
}

/** A refusal: each path with what was expected there and what was found. */
function Refusal({ body }) {
  const conflicts = body.conflicts ?? [];
  return html`<table class="refusal" aria-label="conflicts">
    <thead>
      <tr>
        <th>path</th>
        <th>${body.undoes !== undefined ? 'expected' : 'the session'}</th>
        <th>${body.undoes !== undefined ? 'found' : 'the workspace'}</th>
      </tr>
    </thead>
    <tbody>
      ${conflicts.map(
        (conflict) => html`<tr>
          <td>${conflict.path}</td>
          <td>${describe(conflict.expected ?? conflict.session)}</td>
          <td>${describe(conflict.found ?? conflict.host)}</td>
        </tr>`,
      )}
    </tbody>
  </table>`;
}

/** A tree entry (or a sentence) as a person reads it. */
function describe(value) {
  if (value === null || value === undefined) return 'nothing';
  if (typeof value === 'string') return value;
  if (value.type === 'file')
    return `file, ${value.sizeBytes} bytes (${String(value.digest).slice(7, 19)})`;
  if (value.type === 'symlink') return `link to ${value.target}`;
  return value.type ?? JSON.stringify(value);
}

/** Loads something for `keys`; undefined while loading (for these keys), `{ error }` when it failed. */
function useLoad(load, keys) {
  const [state, setState] = useState(undefined);
  const key = JSON.stringify(keys);
  useEffect(() => {
    let isLive = true;
    load().then(
      (value) => isLive && setState({ key, value }),
      (error) => isLive && setState({ key, error }),
    );
    return () => {
      isLive = false;
    };
  }, keys);
  // What was loaded for other keys is not what is asked for now: undefined (loading) until it is.
  return state?.key === key ? state : undefined;
}

/** C escapes of a quoted name in a diff header, as the byte each stands for. */
const ESCAPED_BYTES = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13, '"': 34, '\\': 92 };

/**
 * A name of a diff header as a path: `/dev/null` is none; a quoted name (git's quoting: C
 * escapes, each byte outside ASCII as three octal digits of its UTF-8) is unquoted; the `a/` or
 * `b/` prefix goes.
 */
function pathOfName(name) {
  if (name === '/dev/null') return undefined;
  let path = name;
  if (name.startsWith('"') && name.endsWith('"') && name.length > 1) {
    const bytes = [];
    const inner = name.slice(1, -1);
    for (let index = 0; index < inner.length; index += 1) {
      const char = inner[index];
      if (char !== '\\') bytes.push(...new TextEncoder().encode(char));
      else if (/[0-7]{3}/.test(inner.slice(index + 1, index + 4))) {
        bytes.push(Number.parseInt(inner.slice(index + 1, index + 4), 8));
        index += 3;
      } else {
        index += 1;
        bytes.push(ESCAPED_BYTES[inner[index]] ?? inner.charCodeAt(index));
      }
    }
    path = new TextDecoder().decode(new Uint8Array(bytes));
  }
  return path.replace(/^[ab]\//, '');
}

/** The two names of a `Binary files A and B differ` line (both sides name the same path). */
function binaryNames(names) {
  if (names.startsWith('/dev/null and ')) return ['/dev/null', names.slice(14)];
  if (names.endsWith(' and /dev/null')) return [names.slice(0, -14), '/dev/null'];
  const half = (names.length - 5) / 2;
  return [names.slice(0, half), names.slice(half + 5)];
}

/**
 * Rewind's unified diff for the renderer, with git's per-file headers added, so that it tells a
 * created or deleted file from a renamed one (`--- /dev/null` alone reads as a rename to it) and
 * a binary file from the text file before it. Each path is named by a token (the renderer would
 * mangle quoted names and backslashes), `names[n]` the path of token n.
 */
function forRenderer(text) {
  const names = [];
  const out = [];
  const header = (before, after) => {
    const token = `\uE000${names.push(before ?? after) - 1}\uE001`;
    out.push(`diff --git a/${token} b/${token}`);
    if (before === undefined) out.push('new file mode 100644');
    if (after === undefined) out.push('deleted file mode 100644');
    return [
      before === undefined ? '/dev/null' : `a/${token}`,
      after === undefined ? '/dev/null' : `b/${token}`,
    ];
  };
  const lines = text.split('\n');
  for (let index = 0; index < lines.length; index += 1) {
    const line = lines[index];
    const hunk = /^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@/.exec(line);
    const binary = /^Binary files (.*) differ(?: \(.*\))?$/.exec(line);
    if (hunk) {
      // A hunk's lines as counted, so that a removed `-- x` is not taken for a header.
      out.push(line);
      let [removed, added] = [Number(hunk[1] ?? 1), Number(hunk[2] ?? 1)];
      while ((removed > 0 || added > 0) && index + 1 < lines.length) {
        const next = lines[++index];
        out.push(next);
        if (next.startsWith('-') || next.startsWith(' ')) removed -= 1;
        if (next.startsWith('+') || next.startsWith(' ')) added -= 1;
      }
    } else if (line.startsWith('--- ') && lines[index + 1]?.startsWith('+++ ')) {
      const [before, after] = header(
        pathOfName(line.slice(4)),
        pathOfName(lines[index + 1].slice(4)),
      );
      out.push(`--- ${before}`, `+++ ${after}`);
      index += 1;
    } else if (binary) {
      const [before, after] = header(...binaryNames(binary[1]).map(pathOfName));
      out.push(`Binary files ${before} and ${after} differ`);
    } else out.push(line);
  }
  return { text: out.join('\n'), names };
}

const escapeHtml = (text) => text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);

/** A unified diff, side by side or line by line, with its file list (+/- per file). */
function DiffView({ text }) {
  const [format, setFormat] = useState('line-by-line');
  if (!text) return html`<p class="hint">No changes to files.</p>`;
  const { text: input, names } = forRenderer(text);
  const rendered = renderDiffHtml(input, {
    outputFormat: format,
    drawFileList: true,
    matching: 'lines',
  }).replace(/\uE000(\d+)\uE001/g, (_, index) => escapeHtml(names[Number(index)]));
  return html`<div class="diff">
    <div class="diff-format" role="group" aria-label="diff format">
      <button aria-pressed=${format === 'line-by-line'} onClick=${() => setFormat('line-by-line')}>
        unified
      </button>
      <button aria-pressed=${format === 'side-by-side'} onClick=${() => setFormat('side-by-side')}>
        side by side
      </button>
    </div>
    <div dangerouslySetInnerHTML=${{ __html: rendered }}></div>
  </div>`;
}

function CheckpointDetail({ session, seq, label, checkpoints, body, onDone }) {
  // By its entry: a label pruned may be taken again by a later checkpoint.
  // The list could not be read: no previous checkpoint to compare with is known.
  const isUnknown = checkpoints === undefined;
  const index = checkpoints?.findIndex((item) => item.seq === seq) ?? -1;
  const previous = index > 0 ? checkpoints[index - 1] : undefined;
  const info = checkpoints?.[index];
  const diff = useLoad(
    () =>
      previous
        ? read('diff', { session, from: previous.label, to: label })
        : Promise.resolve(undefined),
    [session, label, previous?.label],
  );
  return html`
    <p class="facts">
      ${body.fileCount} files · ${body.added ?? 0} added · ${body.modified ?? 0} modified ·
      ${body.deleted ?? 0} deleted
      ${info?.linesAdded !== undefined && html` · <span class="plus">+${info.linesAdded}</span> <span class="minus">−${info.linesRemoved}</span>`}
      ${info?.linesUncounted && html` · <span class="unknown" title=${info.linesUncounted.message}>lines unknown</span>`}
    </p>
    <${RollbackForm} session=${session} label=${label} onDone=${onDone} />
    <h3>Files changed since ${previous ? previous.label : isUnknown ? 'the previous checkpoint' : 'the start (this is the first checkpoint)'}</h3>
    ${
      isUnknown
        ? html`<p class="hint">Not known: the list of checkpoints could not be read (the error is above).</p>`
        : previous
          ? diff === undefined
            ? html`<p class="hint">Loading…</p>`
            : diff.error
              ? html`<p class="problem">${diff.error.message}</p>`
              : html`<${DiffView} text=${diff.value.text} />`
          : html`<p class="hint">The first checkpoint records every file as it was.</p>`
    }
    ${body.conversation && html`<${Conversation} session=${session} label=${label} />`}
  `;
}

/** Rollback to a checkpoint: the plan first (a dry run), then, once confirmed, the rollback. */
function RollbackForm({ session, label, onDone }) {
  const [scope, setScope] = useState('both');
  const [paths, setPaths] = useState('');
  const [plan, setPlan] = useState(undefined);
  const [result, setResult] = useState(undefined);
  const { run: start, ask, isBusy } = useRequests();
  const input = () => ({
    label,
    scope,
    ...(paths.trim() && {
      // One path a line: a name may hold a comma (or a space at either end).
      paths: paths.split('\n').filter((path) => path.trim() !== ''),
    }),
  });
  // The rollback that runs is the plan's: a plan goes when what it was asked for changes.
  const showPlan = () => {
    const planned = input();
    start('the rollback plan', () => act('rollback', session, { ...planned, dryRun: true }))?.then(
      (output) => setPlan({ output, input: planned }),
      (error) => setPlan({ error }),
    );
  };
  const run = () => {
    ask(
      'the rollback',
      `Roll back to ${label}? The current state is saved first, and the rollback can be undone.`,
      () => act('rollback', session, plan.input),
    )?.then(
      (output) => {
        setResult({ output });
        setPlan(undefined);
        onDone();
      },
      (error) => setResult({ error }),
    );
  };
  return html`<form class="rollback" aria-label="rollback" onSubmit=${(event) => event.preventDefault()}>
    <label>
      Restore
      <select aria-label="scope" value=${scope} onChange=${(event) => {
        setScope(event.target.value);
        setPlan(undefined);
      }}>
        <option value="both">files and conversation</option>
        <option value="files">files only</option>
        <option value="conversation">conversation only</option>
      </select>
    </label>
    <label>
      Only these paths
      <textarea
        aria-label="paths"
        rows="2"
        placeholder=${'all (or one path a line:\nsrc\nREADME.md)'}
        value=${paths}
        onInput=${(event) => {
          setPaths(event.target.value);
          setPlan(undefined);
        }}
      ></textarea>
    </label>
    <button type="button" disabled=${isBusy} onClick=${showPlan}>Show the rollback plan</button>
    ${plan?.error && html`<p class="problem" role="alert">${plan.error.message}</p>`}
    ${
      plan?.output &&
      html`<div class="plan" aria-label="rollback plan">
      <p>${plural(plan.output.changes?.length ?? 0, 'path')} would change:</p>
      <ul>
        ${(plan.output.changes ?? []).map((change) => html`<li>${change.action} ${change.path}</li>`)}
      </ul>
      <button type="button" class="danger" disabled=${isBusy} onClick=${run}>Roll back to ${label}</button>
    </div>`
    }
    ${result?.error && html`<p class="problem" role="alert">${result.error.message}</p>`}
    ${result?.output && html`<p class="done" role="status">Rolled back to ${label}.</p>`}
  </form>`;
}

/** A command's output, a request and its response, the files an action changed; its actions. */
function ActionDetail({ session, line, running, onDone }) {
  const id = line.seq;
  const { state, pid } = actionStateOf(line, running);
  // Read again once its state changes: a command that was running has its output then.
  const shown = useLoad(() => read('show', { session, id }), [session, id, state]);
  const diff = useLoad(
    () => read('diff', { session, from: String(id) }).catch(() => undefined),
    [session, id, state],
  );
  const [outcome, setOutcome] = useState(undefined);
  const [draft, setDraft] = useState(undefined);
  const [compensation, setCompensation] = useState(undefined);
  // What the CLI's `rewind undo N` and `rewind compensate N` take (a failed command is undone
  // too: what it changed before it failed); the server refuses, with why, what they refuse.
  const isUndoable =
    line.action.class === 'reversible' &&
    (['done', 'undo-refused', 'interrupted'].includes(state) ||
      (state === 'failed' && line.entry.body.action === 'exec'));
  const isCompensable =
    line.action.class === 'compensable' &&
    !['compensated', 'draft', 'discarded', 'running'].includes(state);
  const { run: start, ask, isBusy } = useRequests();
  const run = (name, input, question) => {
    ask(name, question, () => act(name, session, input))?.then(
      (output) => {
        setOutcome({ output, name });
        onDone();
      },
      (error) => setOutcome({ error, name }),
    );
  };
  const detail = shown?.value;
  return html`
    ${
      state === 'running' &&
      html`<p class="running">
        Still running in process ${pid}: its output and what it changed show once it ends.
      </p>`
    }
    <div class="actions" role="group" aria-label="actions">
      ${
        isUndoable &&
        html`<button disabled=${isBusy} onClick=${() => run('undo', { id }, `Undo #${id}? It is refused if later edits would be overwritten.`)}>
        Undo
      </button>`
      }
      ${
        state === 'draft' &&
        html`<button
          disabled=${isBusy}
          onClick=${() =>
            start('the review', () => act('approve', session, { id, dryRun: true }))?.then(
              (output) => setDraft({ output }),
              (error) => setDraft({ error }),
            )}
        >
          Review the draft
        </button>
        <button disabled=${isBusy} onClick=${() => run('discard', { id }, `Discard draft #${id} for good?`)}>Discard</button>`
      }
      ${
        isCompensable &&
        html`<button
        disabled=${isBusy}
        onClick=${() =>
          start('the review', () => act('compensate', session, { id, dryRun: true }))?.then(
            (output) => setCompensation({ output }),
            (error) => setCompensation({ error }),
          )}
      >
        Review the compensation
      </button>`
      }
    </div>
    ${draft?.error && html`<p class="problem" role="alert">${draft.error.message}</p>`}
    ${
      draft?.output &&
      html`<div class="draft" aria-label="draft">
      <p>Exactly what will run (digest ${draft.output.digest}):</p>
      <pre>${JSON.stringify(draft.output, null, 2)}</pre>
      <button
        class="danger"
        disabled=${isBusy}
        onClick=${() => run('approve', { id, digest: draft.output.digest }, `Run draft #${id} now?`)}
      >
        Approve and run
      </button>
    </div>`
    }
    ${compensation?.error && html`<p class="problem" role="alert">${compensation.error.message}</p>`}
    ${
      compensation?.output &&
      html`<div class="draft" aria-label="compensation">
      <pre>${JSON.stringify(compensation.output, null, 2)}</pre>
      <button class="danger" disabled=${isBusy} onClick=${() => run('compensate', { id }, `Run the compensation of #${id}?`)}>
        Compensate
      </button>
    </div>`
    }
    ${
      outcome?.error &&
      html`<div class="problem" role="alert">
      <p>${outcome.name} refused: ${outcome.error.message}</p>
      ${outcome.error.data?.conflicts && html`<${Refusal} body=${outcome.error.data} />`}
    </div>`
    }
    ${
      outcome?.output?.status === 'refused' &&
      html`<div class="problem" role="alert">
        <p>
          ${outcome.name} refused: ${plural(outcome.output.conflicts.length, 'path')} changed
          since, and would be overwritten.
        </p>
        <${Refusal} body=${{ ...outcome.output, undoes: id }} />
      </div>`
    }
    ${
      outcome?.output?.state === 'failed' &&
      html`<p class="problem" role="alert">${outcome.name} failed: ${failureOf(outcome.output)}.</p>`
    }
    ${
      outcome?.output &&
      outcome.output.status !== 'refused' &&
      outcome.output.state !== 'failed' &&
      html`<p class="done" role="status">
      ${outcome.name} done${outcome.output.status ? `: ${outcome.output.status}` : ''}.
    </p>`
    }
    ${detail?.kind === 'exec' && html`<h3>Command</h3><${CommandLine} command=${detail.started.command} />`}
    ${
      detail?.command &&
      html`<p>${endOf(detail.command)} · ${detail.command.durationMs} ms · sandbox ${detail.command.sandbox}</p>
      <h4>stdout</h4>
      <${Stored} stored=${detail.command.stdout} />
      <h4>stderr</h4>
      <${Stored} stored=${detail.command.stderr} />`
    }
    ${
      detail?.state === 'failed' &&
      detail.closed?.error?.message &&
      html`<p class="problem">Failed: ${detail.closed.error.message}</p>`
    }
    ${
      detail?.request &&
      html`<h3>Request</h3>
        <pre>${exchangeText(`${detail.request.method} ${detail.request.url}`, detail.request.headers)}</pre>
        ${detail.request.body && html`<${Stored} stored=${detail.request.body} />`}`
    }
    ${
      detail?.response &&
      html`<h3>Response</h3>
        <pre>${exchangeText(`${detail.response.status} (${detail.response.durationMs} ms)`, detail.response.headers)}</pre>
        <${Stored} stored=${detail.response.body} />`
    }
    ${detail?.redacted?.length > 0 && html`<p class="hint">Redacted before storing: ${detail.redacted.join(', ')}</p>`}
    ${
      diff?.value?.changes.length > 0 &&
      html`<h3>Files changed</h3><${DiffView} text=${diff.value.text} />`
    }
  `;
}

/** Why an action that ran failed, as a person reads it: how its command ended, its response. */
function failureOf(output) {
  if (output.timedOut) return 'the command timed out';
  if (output.signal) return `the command was ended by ${output.signal}`;
  if (typeof output.exitCode === 'number') {
    const stderr = output.stderr?.trim();
    return `the command exited ${output.exitCode}${stderr ? `: ${stderr}` : ''}`;
  }
  if (output.response) return `the response was ${output.response.status}`;
  return [...(output.warnings ?? []), 'the ledger says more'].join('; ');
}

/** A request or a response as text: its first line, then its headers (its body apart). */
function exchangeText(first, headers) {
  const lines = Object.entries(headers).map(([key, value]) => `${key}: ${value}`);
  return [first, ...lines].join('\n');
}

/**
 * A stored output or body: its text, else what it is (binary bytes by their size), and whether
 * only its first bytes were kept.
 */
function Stored({ stored }) {
  const { text, note } = storedBody(stored);
  return html`<div class="stored">
    ${note && html`<p class="hint">${note}</p>`}
    ${(text !== '' || !note) && html`<pre class="output">${text}</pre>`}
  </div>`;
}

/** A command as it was given: a string for the shell, or each argument of an argv apart. */
function CommandLine({ command }) {
  if (!Array.isArray(command)) return html`<pre>${String(command)}</pre>`;
  return html`<ol class="argv" aria-label="argv">
    ${command.map((arg) => html`<li><code>${String(arg)}</code></li>`)}
  </ol>`;
}

/** How a command ended: its exit code, the signal that ended it, or its time running out. */
function endOf(command) {
  if (command.timedOut) return 'timed out';
  if (command.exitCode !== null && command.exitCode !== undefined)
    return `exit ${command.exitCode}`;
  return `ended by ${command.signal}`;
}

/** Commit of an isolated session: the plan first, then, once confirmed, the commit. */
function CommitButton({ session, onDone }) {
  const [plan, setPlan] = useState(undefined);
  const { run: start, ask, isBusy } = useRequests();
  return html`<span class="commit">
    <button
      disabled=${isBusy}
      onClick=${() =>
        start('the commit plan', () => act('commit', session, { dryRun: true, diff: true }))?.then(
          (output) => setPlan({ output }),
          (error) => setPlan({ error }),
        )}
    >
      Commit to the workspace…
    </button>
    ${plan?.error && html`<span class="problem" role="alert">${plan.error.message}</span>`}
    ${
      plan?.output &&
      html`<div class="plan" aria-label="commit plan">
      <button type="button" class="close" aria-label="close the commit plan" onClick=${() => setPlan(undefined)}>
        ×
      </button>
      ${
        plan.output.status === 'committed'
          ? html`<p class="done" role="status">Committed to the workspace (undoable).</p>`
          : html`<p>${`${plural(plan.output.changes.length, 'path')} to commit, ${plural(plan.output.conflicts.length, 'conflict')}.`}</p>`
      }
      ${plan.output.conflicts.length > 0 && html`<${Refusal} body=${plan.output} />`}
      <ul>
        ${plan.output.changes.map((change) => html`<li>${change.action} ${change.path}</li>`)}
      </ul>
      ${
        // What the commit would write, as a diff of the workspace's files (conflicts left out).
        plan.output.diff && html`<${DiffView} text=${plan.output.diff} />`
      }
      ${
        plan.output.conflicts.length > 0
          ? html`<p class="problem">
              A commit now would be refused: resolve the conflicts in the session (or on the
              workspace), then ask for the plan again.
            </p>`
          : plan.output.changes.length > 0 &&
            html`<button
        class="danger"
        disabled=${isBusy}
        onClick=${() => {
          ask('the commit', 'Commit these changes to the workspace?', () =>
            act('commit', session, {}),
          )?.then(
            (output) => {
              setPlan({ output: { ...output, changes: [], conflicts: output.conflicts ?? [] } });
              onDone();
            },
            (error) => setPlan({ error }),
          );
        }}
      >
        Commit
      </button>`
      }
    </div>`
    }
  </span>`;
}

/** A message's parts: text, and tool calls and results with the id that pairs them. */
function partsOf(message) {
  if (message.type === 'function_call_output')
    return [{ kind: 'result', id: message.call_id, value: message.output }];
  const parts = [];
  const content = message.content ?? message.parts ?? message.output ?? [];
  const list =
    typeof content === 'string'
      ? [{ type: 'text', text: content }]
      : Array.isArray(content)
        ? content
        : [content];
  for (const part of list) {
    if (typeof part === 'string') parts.push({ kind: 'text', text: part });
    else if (part.text !== undefined && (part.type === undefined || /text/.test(part.type)))
      parts.push({ kind: 'text', text: part.text });
    else if (part.type === 'tool_use' || part.type === 'tool-call')
      parts.push({
        kind: 'call',
        id: part.id ?? part.toolCallId,
        name: part.name ?? part.toolName,
        args: part.input ?? part.args,
      });
    else if (part.type === 'tool_result' || part.type === 'tool-result')
      parts.push({
        kind: 'result',
        id: part.tool_use_id ?? part.toolCallId,
        value: part.content ?? part.output ?? part.result,
      });
    else if (part.functionCall)
      parts.push({
        kind: 'call',
        id: part.functionCall.id,
        name: part.functionCall.name,
        args: part.functionCall.args,
      });
    else if (part.functionResponse)
      parts.push({
        kind: 'result',
        id: part.functionResponse.id,
        name: part.functionResponse.name,
        value: part.functionResponse.response,
      });
    else parts.push({ kind: 'other', value: part });
  }
  for (const call of message.tool_calls ?? [])
    parts.push({
      kind: 'call',
      id: call.id,
      name: call.function?.name ?? call.name,
      args: call.function?.arguments ?? call.args,
    });
  if (message.type === 'function_call')
    parts.push({ kind: 'call', id: message.call_id, name: message.name, args: message.arguments });

  if (message.role === 'tool' && message.tool_call_id)
    return [{ kind: 'result', id: message.tool_call_id, value: message.content }];
  return parts;
}

/** LangChain's classes of messages, by the role each is shown with. */
const LANGCHAIN_ROLES = {
  HumanMessage: 'human',
  AIMessage: 'ai',
  SystemMessage: 'system',
  ToolMessage: 'tool',
  ChatMessage: 'generic',
  FunctionMessage: 'function',
};

/**
 * A LangChain message (serialized by `toJSON()`, or as `{ type, data }`) as its fields with its
 * role; any other format's message as it is.
 */
function plainMessage(message, format) {
  if (format !== 'langchain') return message;
  if (message.lc === 1 && message.type === 'constructor' && Array.isArray(message.id)) {
    const name = String(message.id.at(-1)).replace(/Chunk$/, '');
    return { ...message.kwargs, role: LANGCHAIN_ROLES[name] ?? name };
  }
  return message.data ? { ...message.data, role: message.type } : message;
}

/**
 * Each tool call's result: by id, or (a Gemini call and result without ids) the results of that
 * name in order, the first result to the first call.
 */
function resultsOfCalls(partsList) {
  const byId = new Map();
  const byName = new Map();
  for (const part of partsList.flat()) {
    if (part.kind !== 'result') continue;
    if (part.id !== undefined) byId.set(part.id, part);
    else byName.set(part.name, [...(byName.get(part.name) ?? []), part]);
  }
  const results = new Map();
  for (const part of partsList.flat()) {
    if (part.kind !== 'call') continue;
    const result = part.id !== undefined ? byId.get(part.id) : byName.get(part.name)?.shift();
    if (result) results.set(part, result);
  }
  return results;
}

/** The conversation a checkpoint recorded: messages in order, each tool call with its result. */
function Conversation({ session, label }) {
  const shown = useLoad(() => read('conversation', { session, label }), [session, label]);
  if (!shown) return html`<p class="hint">Loading the conversation…</p>`;
  if (shown.error) return html`<p class="problem">${shown.error.message}</p>`;
  const { format, messages } = shown.value;
  const shownMessages = messages.map((message) => plainMessage(message, format));
  const partsList = shownMessages.map(partsOf);
  const results = resultsOfCalls(partsList);
  const text = (value) => (typeof value === 'string' ? value : JSON.stringify(value, null, 2));
  return html`<h3>Conversation (${format}, ${messages.length} messages)</h3>
    <ol class="conversation" aria-label="conversation">
      ${shownMessages.map((message, index) => {
        const parts = partsList[index].filter((part) => part.kind !== 'result');
        if (parts.length === 0) return null;
        return html`<li class=${`message ${message.role ?? message.type ?? 'other'}`}>
          <span class="role">${message.role ?? message.type ?? 'message'}</span>
          ${parts.map((part) =>
            part.kind === 'text'
              ? html`<p>${part.text}</p>`
              : part.kind === 'call'
                ? html`<div class="tool-call">
                    <span>tool ${part.name}</span>
                    <pre>${text(part.args)}</pre>
                    ${
                      results.has(part) &&
                      html`<div class="tool-result"><span>result</span><pre>${text(results.get(part).value)}</pre></div>`
                    }
                  </div>`
                : html`<pre>${text(part.value)}</pre>`,
          )}
        </li>`;
      })}
    </ol>`;
}

const root = document.getElementById('app');
root.textContent = '';
render(html`<${App} />`, root);
