// Client addresses: parsing, the IPv6 /64 a client owns, trusted proxies and X-Forwarded-For.

/** A parsed address: IPv4 as a 32-bit value, IPv6 as a 128-bit value. */
export interface Address {
  version: 4 | 6;
  value: bigint;
}

function parseV4(s: string): bigint | null {
  const parts = s.split('.');
  if (parts.length !== 4) return null;
  let v = 0n;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p)) return null;
    const n = Number(p);
    if (n > 255 || (p.length > 1 && p[0] === '0')) return null;
    v = (v << 8n) | BigInt(n);
  }
  return v;
}

function parseV6(input: string): bigint | null {
  let s = input;
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  if (!/^[0-9a-fA-F:.]+$/.test(s)) return null;
  let tail: bigint[] = [];
  let expected = 8;
  // An embedded IPv4 in the last 32 bits (::ffff:1.2.3.4, 64:ff9b::1.2.3.4).
  if (s.includes('.')) {
    const lastColon = s.lastIndexOf(':');
    const v4 = parseV4(s.slice(lastColon + 1));
    if (v4 === null) return null;
    tail = [v4 >> 16n, v4 & 0xffffn];
    expected = 6;
    s = s.slice(0, lastColon + 1);
    if (!s.endsWith('::')) s = s.slice(0, -1);
  }
  const halves = s.split('::');
  if (halves.length > 2) return null;
  const group = (h: string): bigint[] | null => {
    if (h === '') return [];
    const out: bigint[] = [];
    for (const g of h.split(':')) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return null;
      out.push(BigInt(`0x${g}`));
    }
    return out;
  };
  const head = group(halves[0]);
  const rest = halves.length === 2 ? group(halves[1]) : [];
  if (!head || !rest) return null;
  const known = head.length + rest.length;
  let groups: bigint[];
  if (halves.length === 2) {
    if (known > expected - 1) return null;
    groups = [...head, ...Array<bigint>(expected - known).fill(0n), ...rest, ...tail];
  } else {
    if (known !== expected) return null;
    groups = [...head, ...tail];
  }
  return groups.reduce((acc, g) => (acc << 16n) | g, 0n);
}

/** Parses an address as it appears in a socket or a header: "1.2.3.4", "1.2.3.4:80",
 * "2001:db8::1", "[2001:db8::1]:443", "fe80::1%eth0". IPv4-mapped IPv6 (::ffff:1.2.3.4)
 * is IPv4. null if it is not an address. */
export function parseAddress(text: string | undefined | null): Address | null {
  let a = String(text ?? '').trim();
  if (!a) return null;
  if (a.startsWith('[')) {
    const end = a.indexOf(']');
    if (end < 0) return null;
    a = a.slice(1, end);
  } else if (/^[\d.]+:\d+$/.test(a)) {
    a = a.slice(0, a.indexOf(':'));
  }
  if (!a.includes(':')) {
    const v4 = parseV4(a);
    return v4 === null ? null : { version: 4, value: v4 };
  }
  const v6 = parseV6(a);
  if (v6 === null) return null;
  if (v6 >> 32n === 0xffffn) return { version: 4, value: v6 & 0xffffffffn };
  return { version: 6, value: v6 };
}

/** RFC 5952 text: lower case, the longest run of two or more zero groups as "::". */
export function formatAddress(a: Address): string {
  if (a.version === 4) {
    return [24n, 16n, 8n, 0n].map((s) => String((a.value >> s) & 255n)).join('.');
  }
  const g: number[] = [];
  for (let i = 7; i >= 0; i--) g.push(Number((a.value >> BigInt(i * 16)) & 0xffffn));
  let bestStart = -1; let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) { i++; continue; }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) { bestStart = i; bestLen = j - i; }
    i = j;
  }
  const hex = g.map((x) => x.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

function mask(a: Address, bits: number): Address {
  const width = a.version === 4 ? 32 : 128;
  const b = Math.max(0, Math.min(width, bits));
  const all = (1n << BigInt(width)) - 1n;
  const m = b === 0 ? 0n : (all >> BigInt(width - b)) << BigInt(width - b);
  return { version: a.version, value: a.value & m };
}

/** The rate-limiting identity of an address: IPv4 as it is, IPv6 as the network of its
 * first `v6Prefix` bits (default /64, what one home connection or server is given), e.g.
 * "2001:db8:1:2::/64". A client rotating addresses inside its /64 stays one client. */
export function addressKey(text: string | undefined | null, v6Prefix = 64): string | null {
  const a = parseAddress(text);
  if (!a) return null;
  if (a.version === 4 || v6Prefix >= 128) return formatAddress(a);
  return `${formatAddress(mask(a, v6Prefix))}/${v6Prefix}`;
}

/** A set of networks ("10.0.0.0/8", "::1", "fd00::/8"). */
export class Networks {
  private readonly nets: { version: 4 | 6; value: bigint; bits: number }[] = [];
  constructor(list: string[]) {
    for (const item of list) {
      const [addr, bitsText] = item.split('/');
      const a = parseAddress(addr);
      if (!a) throw new TypeError(`redis-ratelimit: not an address or network: ${item}`);
      const width = a.version === 4 ? 32 : 128;
      const bits = bitsText === undefined ? width : Number(bitsText);
      if (!Number.isInteger(bits) || bits < 0 || bits > width) {
        throw new TypeError(`redis-ratelimit: bad prefix length in ${item}`);
      }
      this.nets.push({ version: a.version, value: mask(a, bits).value, bits });
    }
  }
  has(a: Address): boolean {
    return this.nets.some((n) => n.version === a.version && mask(a, n.bits).value === n.value);
  }
}

/** Who the trusted proxies are: how many sit in front of the app (each appends the address
 * it got the request from to X-Forwarded-For), or their addresses / networks. */
export type TrustedProxies = number | string[] | Networks;

const hopsOf = (xff: string | string[] | undefined): string[] => {
  const lines = Array.isArray(xff) ? xff : xff ? [xff] : [];
  return lines.flatMap((l) => l.split(',')).map((h) => h.trim()).filter(Boolean);
};

/** The client's address, from the TCP peer, the X-Forwarded-For header and the trusted
 * proxies. Entries left of the last trusted hop were written by the client and may be
 * forged, so the header is read from the right:
 *  - a count n: the n-th entry from the right (fewer entries: the peer);
 *  - a list of networks: walking from the peer leftwards, the first address that is not a
 *    trusted proxy (the peer itself if it is not trusted);
 *  - 0 or nothing: the peer (the header is ignored).
 * An entry that is not an address stops the walk at the last good address. */
export function clientAddress(peer: string | undefined, xff: string | string[] | undefined,
  trusted: TrustedProxies | undefined): string {
  const peerAddr = parseAddress(peer);
  const peerText = peerAddr ? formatAddress(peerAddr) : String(peer ?? '');
  if (trusted === undefined || trusted === 0) return peerText;
  const hops = hopsOf(xff);
  if (typeof trusted === 'number') {
    if (!(trusted > 0) || hops.length < trusted) return peerText;
    const a = parseAddress(hops[hops.length - trusted]);
    return a ? formatAddress(a) : peerText;
  }
  const nets = trusted instanceof Networks ? trusted : new Networks(trusted);
  if (!peerAddr || !nets.has(peerAddr)) return peerText;
  let last = peerAddr;
  for (let i = hops.length - 1; i >= 0; i--) {
    const a = parseAddress(hops[i]);
    if (!a) break;
    last = a;
    if (!nets.has(a)) return formatAddress(a);
  }
  return formatAddress(last);
}
