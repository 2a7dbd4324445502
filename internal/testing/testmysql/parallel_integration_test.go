//go:build integration

package testmysql

import (
	"sync"
	"testing"
)

// Servers started at once (test packages run in parallel) do not collide.
func TestServersStartInParallel(t *testing.T) {
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() {
			s, err := Start()
			errs[i] = err
			if err == nil {
				s.Close()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
