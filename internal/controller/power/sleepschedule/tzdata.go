package sleepschedule

// The time zone database is compiled in: the manager's image may have none, and a
// schedule must read its time zone the same way wherever Orderly runs.
import _ "time/tzdata"
