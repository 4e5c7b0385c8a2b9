/** A parsed address: IPv4 as a 32-bit value, IPv6 as a 128-bit value. */
export interface Address {
    version: 4 | 6;
    value: bigint;
}
/** Parses an address as it appears in a socket or a header: "1.2.3.4", "1.2.3.4:80",
 * "2001:db8::1", "[2001:db8::1]:443", "fe80::1%eth0". IPv4-mapped IPv6 (::ffff:1.2.3.4)
 * is IPv4. null if it is not an address. */
export declare function parseAddress(text: string | undefined | null): Address | null;
/** RFC 5952 text: lower case, the longest run of two or more zero groups as "::". */
export declare function formatAddress(a: Address): string;
/** The rate-limiting identity of an address: IPv4 as it is, IPv6 as the network of its
 * first `v6Prefix` bits (default /64, what one home connection or server is given), e.g.
 * "2001:db8:1:2::/64". A client rotating addresses inside its /64 stays one client. */
export declare function addressKey(text: string | undefined | null, v6Prefix?: number): string | null;
/** A set of networks ("10.0.0.0/8", "::1", "fd00::/8"). */
export declare class Networks {
    private readonly nets;
    constructor(list: string[]);
    has(a: Address): boolean;
}
/** Who the trusted proxies are: how many sit in front of the app (each appends the address
 * it got the request from to X-Forwarded-For), or their addresses / networks. */
export type TrustedProxies = number | string[] | Networks;
/** The client's address, from the TCP peer, the X-Forwarded-For header and the trusted
 * proxies. Entries left of the last trusted hop were written by the client and may be
 * forged, so the header is read from the right:
 *  - a count n: the n-th entry from the right (fewer entries: the peer);
 *  - a list of networks: walking from the peer leftwards, the first address that is not a
 *    trusted proxy (the peer itself if it is not trusted);
 *  - 0 or nothing: the peer (the header is ignored).
 * An entry that is not an address stops the walk at the last good address. */
export declare function clientAddress(peer: string | undefined, xff: string | string[] | undefined, trusted: TrustedProxies | undefined): string;
