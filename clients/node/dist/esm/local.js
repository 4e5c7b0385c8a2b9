// Local refusals: after the server refused a request for a (limit, identity) with
// retry_after_ms = R > 0, the process refuses later requests of that (limit, identity) with
// a cost at least the refused one's until refused_at + R on the package clock, without a
// Redis call. A bounded cache: when full, the entry that ends soonest is dropped.
export class LocalRefusals {
    maxKeys;
    entries = new Map();
    constructor(maxKeys = 10000) {
        this.maxKeys = maxKeys;
        if (!Number.isSafeInteger(maxKeys) || maxKeys < 1)
            throw new RangeError('redis-ratelimit: localRefusals.maxKeys must be an integer >= 1');
    }
    get size() { return this.entries.size; }
    /** The entry refusing a request of `cost` on `key` at `now` (an ended entry is dropped). */
    find(key, cost, now) {
        const e = this.entries.get(key);
        if (!e)
            return undefined;
        if (e.until <= now) {
            this.entries.delete(key);
            return undefined;
        }
        return cost >= e.cost ? e : undefined;
    }
    /** The server refused `cost` on `key` for `retryAfterMs` from `now`. */
    refused(key, cost, retryAfterMs, now) {
        if (!(retryAfterMs > 0))
            return;
        this.entries.delete(key);
        if (this.entries.size >= this.maxKeys) {
            // drop the entry that ends soonest (ended ones first: they end before now)
            let soonest;
            let end = Infinity;
            for (const [k, v] of this.entries)
                if (v.until < end) {
                    end = v.until;
                    soonest = k;
                }
            if (soonest !== undefined)
                this.entries.delete(soonest);
        }
        this.entries.set(key, { until: now + retryAfterMs, cost });
    }
    /** The server admitted a request on `key`. */
    admitted(key) {
        this.entries.delete(key);
    }
    clear() { this.entries.clear(); }
}
