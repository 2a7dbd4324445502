package database

import (
	"fmt"

	"orderly.dev/orderly/internal/kit"
)

// ConnectorOf is the Connector the manager hands the controllers in deps.Databases,
// or nil when it has none. Anything else there is a mistake in how the manager (or a
// test) was put together, reported when the controller is set up.
func ConnectorOf(deps kit.Deps) (Connector, error) {
	switch c := deps.Databases.(type) {
	case nil:
		return nil, nil
	case Connector:
		return c, nil
	}
	return nil, fmt.Errorf("kit.Deps.Databases holds a %T, which is not a database.Connector", deps.Databases)
}
