package main

import (
	"fmt"
	"math"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// setClientLimits sets the client-side rate limit of every client made from cfg
// (--kube-api-qps, --kube-api-burst).
//
// By default (qps 0) there is none: the API server's Priority and Fairness queues
// and, past its share, refuses Orderly's requests with 429 and Retry-After, which
// client-go honours (it waits and retries), so the server, which knows its own load,
// paces Orderly. This is controller-runtime's default too (QPS -1): a fixed
// client-side limit either wastes a server with room to spare or does not protect one
// that has none. Orderly's own concurrency is bounded anyway (the workers of each
// controller, and the SleepSchedule controller's write pool).
//
// With qps above zero, one token bucket limits the whole process: client-go otherwise
// gives every REST client (one per kind in controller-runtime) its own, and the flag
// would not bound what Orderly sends in total. burst 0 means twice qps.
func setClientLimits(cfg *rest.Config, qps float32, burst int) error {
	if qps < 0 || burst < 0 {
		return fmt.Errorf("--kube-api-qps (%g) and --kube-api-burst (%d) must be 0 (no client-side limit) or more", qps, burst)
	}
	if qps == 0 {
		// 0 would be client-go's default of 5 requests a second.
		cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
		return nil
	}
	if burst == 0 {
		burst = int(math.Ceil(2 * float64(qps)))
	}
	cfg.QPS, cfg.Burst = qps, burst
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	return nil
}
