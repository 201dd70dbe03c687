import { describe, expect, it } from 'vitest';
import { createRedactor, REDACTED, REDACTION_LOOKAHEAD_BYTES } from '../../src/lib/index.js';

const credentials = createRedactor({ headers: true });

describe('URL passwords', () => {
  it('are redacted in any scheme, the rest of the URL kept', () => {
    const cases: [string, string][] = [
      [
        'git clone https://bob:hunter22@git.example/repo.git',
        `https://bob:${REDACTED}@git.example`,
      ],
      ['psql "postgres://app:pg-Secret_1@db:5432/app"', `postgres://app:${REDACTED}@db:5432/app"`],
      ['REDIS_URL=redis://:cachepass@cache:6379/0', `redis://:${REDACTED}@cache:6379/0`],
      ['amqp+ssl://u:p%40ss%2Fword@mq/vhost', `amqp+ssl://u:${REDACTED}@mq/vhost`],
      // An unescaped @ in the password: everything up to the authority's last @.
      ['mysql://root:p@ss@db/x', `mysql://root:${REDACTED}@db/x`],
      ['{"url":"https://u:tok-123@h/x"}', `"https://u:${REDACTED}@h/x"`],
    ];
    for (const [input, expected] of cases) {
      const redacted = credentials.text(input);
      expect(redacted.text).toContain(expected);
      expect(redacted.count).toBe(1);
    }
    expect(credentials.text('a https://a:one@h and ftp://b:two@k').text).toBe(
      `a https://a:${REDACTED}@h and ftp://b:${REDACTED}@k`,
    );
  });

  it('leaves URLs without a password, text redacted already, and sessions without --redact alone', () => {
    for (const input of [
      'ssh://git@github.com/org/repo',
      'https://example.com/a:b@c',
      'see http://host:8080/path',
      `https://u:${REDACTED}@h`,
    ]) {
      expect(credentials.text(input)).toEqual({ text: input, count: 0 });
    }
    expect(createRedactor({ patterns: ['x{9}'] }).text('https://u:pw-secret@h').count).toBe(0);
  });

  it('name the secrets to scrub elsewhere: as written, decoded, and as a Basic credential', () => {
    expect(credentials.secretsIn('curl https://bob:p%40ss1@h/')).toEqual(
      expect.arrayContaining(['p%40ss1', 'p@ss1', Buffer.from('bob:p@ss1').toString('base64')]),
    );
    expect(createRedactor({}).secretsIn('curl https://bob:pass1@h/')).toEqual([]);
  });
});

describe('rules together', () => {
  it('replace what any rule covers once, in the text as given', () => {
    const redactor = createRedactor({ headers: true, patterns: ['sk-[a-z0-9]{8,}'] });
    const redacted = redactor.text('key sk-abcdefgh12 in https://u:sk-abcdefgh12@h', [
      'sk-abcdefgh12',
    ]);
    expect(redacted.text).toBe(`key ${REDACTED} in https://u:${REDACTED}@h`);
    expect(redacted.count).toBe(2);
  });
});

describe('a cap', () => {
  const cap = 100;
  const filler = 'a'.repeat(cap - 6);

  it('never keeps part of a secret it falls inside: the secret is replaced whole', () => {
    const cases = [
      { redactor: createRedactor({ patterns: ['sk-[a-z0-9]{8,}'] }), text: 'sk-abcdefgh1234' },
      { redactor: credentials, before: 'https://u:', text: 'LONGPASSWORD1', after: '@host/' },
      { redactor: createRedactor({}), text: 'LITERAL-SECRET', literals: ['LITERAL-SECRET'] },
    ];
    for (const { redactor, before = '', text, after = '', literals } of cases) {
      // The cap falls three characters into the secret.
      const input = `${'a'.repeat(cap - 3 - before.length)}${before}${text}${after} and more after it`;
      const capped = redactor.capped(input, cap, literals);
      expect(capped.truncated).toBe(true);
      expect(capped.count).toBe(1);
      expect(capped.text).not.toContain(text.slice(0, 3));
      expect(capped.text).toBe(`${'a'.repeat(cap - 3 - before.length)}${before}${REDACTED}`);
    }
  });

  it('cuts at the cap otherwise, never splitting a marker, and says whether it cut', () => {
    const redactor = createRedactor({ patterns: ['sk-[a-z0-9]{8,}'] });
    expect(redactor.capped('short sk-abcdefgh1', cap)).toEqual({
      text: `short ${REDACTED}`,
      count: 1,
      truncated: false,
    });
    const capped = redactor.capped(`sk-abcdefgh1 ${'b'.repeat(200)}`, cap);
    expect(capped).toMatchObject({ count: 1, truncated: true });
    expect(capped.text).toBe(`${REDACTED} ${'b'.repeat(cap - 13)}`);
    // A secret wholly past the cap is not counted (nothing of it is kept).
    expect(redactor.capped(`${'c'.repeat(200)} sk-abcdefgh1`, cap)).toEqual({
      text: 'c'.repeat(cap),
      count: 0,
      truncated: true,
    });
  });

  it('looks far enough past the cap for a long secret', () => {
    const redactor = createRedactor({ patterns: ['-----BEGIN KEY-----[^-]*-----END KEY-----'] });
    const key = `-----BEGIN KEY-----${'k'.repeat(REDACTION_LOOKAHEAD_BYTES / 2)}-----END KEY-----`;
    const capped = redactor.capped(`${filler}${key}${'z'.repeat(REDACTION_LOOKAHEAD_BYTES)}`, cap);
    expect(capped.text).toBe(`${filler}${REDACTED}`);
  });
});
