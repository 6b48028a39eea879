package controlplane

import (
	"context"
	"time"
)

// poll calls cond every interval until it returns true or an error, or ctx
// ends. It checks immediately, so a fast component costs no sleep at all.
func poll(ctx context.Context, interval time.Duration, cond func() (bool, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
