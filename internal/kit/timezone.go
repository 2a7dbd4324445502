package kit

import (
	"fmt"
	"time"

	// Every time zone a user names resolves, whatever the host or the image has in
	// /usr/share/zoneinfo (the manager's image has none).
	_ "time/tzdata"
)

// LoadLocation resolves the time zone a user wrote in a spec; "" is UTC. Every
// controller reads a user's time zone through it, so a schedule means the same
// wherever Orderly runs: "Local" (the zone of whatever host the manager is on) is
// refused like an unknown name.
func LoadLocation(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "Local" {
		return nil, fmt.Errorf("unknown time zone %q: use an IANA name such as Europe/Berlin", name)
	}
	return loc, nil
}
