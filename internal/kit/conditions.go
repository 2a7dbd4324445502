package kit

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxConditionMessage is the longest condition message the API server accepts, in bytes.
const MaxConditionMessage = 32768

// Conditions sets the conditions of one status, each stamped with the generation it
// was computed for. A condition keeps its lastTransitionTime while its status stays.
type Conditions struct {
	list       *[]metav1.Condition
	generation int64
	now        time.Time
}

// ConditionsOf returns a setter for list, stamping conditions with generation.
func ConditionsOf(list *[]metav1.Condition, generation int64) Conditions {
	return Conditions{list: list, generation: generation}
}

// At stamps the transitions it sets with now, the controller's injected clock; without
// it they get the wall clock.
func (c Conditions) At(now time.Time) Conditions {
	c.now = now
	return c
}

// Set sets one condition; the message is cut to what the API server accepts.
func (c Conditions) Set(typ string, status metav1.ConditionStatus, reason, message string) {
	cond := metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: Truncate(message, MaxConditionMessage), ObservedGeneration: c.generation,
	}
	if !c.now.IsZero() {
		cond.LastTransitionTime = metav1.NewTime(c.now)
	}
	meta.SetStatusCondition(c.list, cond)
}

// True sets condition typ to True.
func (c Conditions) True(typ, reason, message string) {
	c.Set(typ, metav1.ConditionTrue, reason, message)
}

// False sets condition typ to False.
func (c Conditions) False(typ, reason, message string) {
	c.Set(typ, metav1.ConditionFalse, reason, message)
}

// Unknown sets condition typ to Unknown.
func (c Conditions) Unknown(typ, reason, message string) {
	c.Set(typ, metav1.ConditionUnknown, reason, message)
}

// Remove removes condition typ, for a condition that no longer applies (the feature
// it reports on was turned off); a condition that is not there is no change.
func (c Conditions) Remove(typ string) {
	meta.RemoveStatusCondition(c.list, typ)
}

// Truncate cuts s to at most n bytes, ending in "..." when cut, without splitting a
// UTF-8 character.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "..."
	if n <= len(ellipsis) {
		return ellipsis[:max(n, 0)]
	}
	cut := n - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// FirstN joins the first n names and says how many more there are:
// "a, b, c and 7 more".
func FirstN(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + fmt.Sprintf(" and %d more", len(names)-n)
}

// Bounded returns at most n names, for the bounded lists of a status.
func Bounded(names []string, n int) []string {
	if len(names) > n {
		return names[:n]
	}
	return names
}
