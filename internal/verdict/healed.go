package verdict

import (
	"fmt"
	"time"
)

// SoldOutAfterHeal judges the 409 sold-out answers of a faulted run whose
// current round ended with final > 0 units: stock only falls within a
// round, so each of them was false. sent is when each was sent. Those sent
// before the fault healed fall in an honest window (a lock or counter
// lost and rebuilt while the fault is active), bounded by the fault's
// duration: during counts them, to report. Those sent after it healed
// (after) break a safe strategy's promise that every answer is true; why
// then says so, else it is "".
func SoldOutAfterHeal(final int64, healed time.Time, sent []time.Time) (during, after int, why string) {
	if final <= 0 {
		return 0, 0, ""
	}
	for _, t := range sent {
		if t.Before(healed) {
			during++
		} else {
			after++
		}
	}
	if after > 0 {
		why = fmt.Sprintf("answered 409 sold out %d time%s after the fault had healed, while %d unit%s remained",
			after, plural(after, "", "s"), final, plural(int(final), "", "s"))
	}
	return during, after, why
}
