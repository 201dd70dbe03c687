import { describe, expect, it } from 'vitest';
import { checkTarget, refusalOf } from '../../src/sandbox/index.js';

// [address, refused always (why), refused with block-private (why)]; undefined: it may go.
const TABLE: [string, string | undefined, string | undefined][] = [
  // The metadata service 169.254.169.254 in every IPv6 form that carries an IPv4 address.
  ['::ffff:169.254.169.254', 'link-local', 'link-local'],
  ['::ffff:a9fe:a9fe', 'link-local', 'link-local'],
  ['0:0:0:0:0:ffff:a9fe:a9fe', 'link-local', 'link-local'],
  ['::FFFF:A9FE:A9FE', 'link-local', 'link-local'],
  ['::169.254.169.254', 'IPv4-compatible', 'link-local'],
  ['::a9fe:a9fe', 'IPv4-compatible', 'IPv4-compatible'],
  ['::ffff:0:a9fe:a9fe', 'IPv4-translated', 'IPv4-translated'],
  ['64:ff9b::a9fe:a9fe', 'NAT64', 'NAT64'],
  ['64:ff9b::169.254.169.254', 'link-local', 'link-local'],
  ['64:ff9b:1::a9fe:a9fe', 'local-use NAT64', 'local-use NAT64'],
  ['2002:a9fe:a9fe::', '6to4', '6to4'],
  ['2002:a9fe:a9fe:1::1', 'link-local', 'link-local'],
  ['2001:0:4136:e378:8000:63bf:5601:5601', 'Teredo client', 'Teredo client'],
  ['2001:0:a9fe:a9fe::1', 'Teredo server', 'Teredo server'],
  ['2600::5efe:a9fe:a9fe', 'ISATAP', 'ISATAP'],
  ['2600::200:5efe:169.254.169.254', 'ISATAP', 'ISATAP'],
  ['fe80::a9fe:a9fe%eth0', 'link-local', 'link-local'],
  // Other refused IPv4 ranges, carried the same ways.
  ['::ffff:0.0.0.0', 'unspecified', 'unspecified'],
  ['2002:e000:1::', 'multicast', 'multicast'],
  ['64:ff9b::c000:210', 'documentation', 'documentation'],
  // Loopback and private ones: refused only with block-private.
  ['::ffff:127.0.0.1', undefined, 'loopback'],
  ['::ffff:7f00:1', undefined, 'loopback'],
  ['::127.0.0.1', undefined, 'loopback'],
  ['64:ff9b::a00:1', undefined, 'private'],
  ['2002:c0a8:101::', undefined, 'private'],
  ['2002:7f00:1::1', undefined, 'loopback'],
  ['2001:0:4136:e378:8000:63bf:80ff:fffe', undefined, 'loopback'],
  ['::1', undefined, 'loopback'],
  ['::', 'unspecified', 'unspecified'],
  // Public IPv4 addresses carried in IPv6, and plain public IPv6: allowed.
  ['::ffff:8.8.8.8', undefined, undefined],
  ['64:ff9b::808:808', undefined, undefined],
  ['2002:808:808::1', undefined, undefined],
  ['2001:0:4136:e378:8000:63bf:f7f7:f7f7', undefined, undefined],
  ['2606:4700::1111', undefined, undefined],
  ['2a00:1450:4001:80b::200e', undefined, undefined],
];

describe('refusalOf', () => {
  it.each(TABLE)('classifies %s as the IPv4 address it carries', (address, always, blocked) => {
    const asked = refusalOf(address, false);
    if (always === undefined) expect(asked).toBeUndefined();
    else expect(asked).toContain(always);
    const strict = refusalOf(address, true);
    if (blocked === undefined) expect(strict).toBeUndefined();
    else expect(strict).toContain(blocked);
  });

  it('refuses a URL naming such an address before sending anything; lets a public one through', async () => {
    await expect(
      checkTarget(new URL('http://[::ffff:169.254.169.254]/latest/meta-data/'), false),
    ).rejects.toMatchObject({ code: 'ADDRESS_REFUSED' });
    await expect(checkTarget(new URL('http://[2002:a9fe:a9fe::1]/'), false)).rejects.toMatchObject({
      code: 'ADDRESS_REFUSED',
      message: expect.stringContaining('6to4'),
    });
    await expect(checkTarget(new URL('http://[2002:7f00:1::1]/'), true)).rejects.toMatchObject({
      code: 'ADDRESS_REFUSED',
      message: expect.stringContaining('Private and loopback targets are blocked'),
    });
    await expect(checkTarget(new URL('http://[2002:808:808::1]/'), true)).resolves.toEqual({
      address: '2002:808:808::1',
      family: 6,
    });
  });
});
