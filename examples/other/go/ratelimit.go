// Package ratelimit: net/http middleware on go-redis v9 (github.com/redis/go-redis/v9).
package ratelimit

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Decision holds one rule's standard reply: the five fields, in order.
type Decision struct {
	Allowed      bool
	Limit        int64
	Remaining    int64
	RetryAfterMs int64
	ResetAfterMs int64
}

// Limit admits a request only if both limits admit it, in one atomic RL.ALL: per user 10 at
// once then 5 per second, per organisation 1000 per sliding minute. A refusal spends nothing
// on either. The keys share a hash tag, so Redis Cluster sends both to one node.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ReadTimeout: 50 * time.Millisecond})
//	http.ListenAndServe(":8080", ratelimit.Limit(rdb, mux))
func Limit(rdb *redis.Client, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		org, user := r.Header.Get("X-Org-Id"), r.Header.Get("X-User-Id")
		reply, err := rdb.Do(r.Context(), "RL.ALL", 2, "rl:{org:"+org+"}:user:"+user, "rl:{org:"+org+"}",
			"GCRA", 10, 5, 1000, "SLIDING", 1000, 60000).Slice()
		var rerr redis.Error
		if errors.As(err, &rerr) { // an error reply (e.g. the module is not loaded): say so
			http.Error(w, rerr.Error(), http.StatusInternalServerError)
			return
		}
		if err != nil { // Redis down or slow: fail open
			next.ServeHTTP(w, r)
			return
		}
		// reply: allowed (0/1), refused_by (1-based index of the refusing rule, 0 if admitted),
		// then each rule's own five fields
		allowed, refusedBy := reply[0].(int64) == 1, reply[1].(int64)
		rules := make([]Decision, 0, len(reply)-2)
		for _, v := range reply[2:] {
			f := v.([]interface{})
			rules = append(rules, Decision{f[0].(int64) == 1, f[1].(int64), f[2].(int64), f[3].(int64), f[4].(int64)})
		}
		// Headers: the refusing rule, else the one with the fewest remaining.
		tight := rules[0]
		for _, d := range rules[1:] {
			if d.Remaining < tight.Remaining {
				tight = d
			}
		}
		if !allowed {
			tight = rules[refusedBy-1]
		}
		h := w.Header()
		h.Set("RateLimit-Limit", strconv.FormatInt(tight.Limit, 10))
		h.Set("RateLimit-Remaining", strconv.FormatInt(tight.Remaining, 10))
		if !allowed {
			var retryMs int64 // the longest wait among the rules that refuse
			for _, d := range rules {
				if !d.Allowed && d.RetryAfterMs > retryMs {
					retryMs = d.RetryAfterMs
				}
			}
			h.Set("Retry-After", strconv.FormatInt((retryMs+999)/1000, 10)) // seconds, rounded up
			http.Error(w, "Too Many Requests", http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
}
