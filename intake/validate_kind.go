package intake

import (
	"errors"
	"fmt"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/permit"
)

// Forwarded concurrency limits, reservations and operations on tokens
// (issue 26). An owner older than these refuses an op item for its cost 0
// and never sees Reserve; this one holds them to what its policy allows,
// once the item's Defs are filled from it (checkKinds).

// checkOp checks an op item's own fields: a known kind, a non-zero id, a
// renewal ttl in [0, permit.MaxTTL], a settled cost in [0, gcra.MaxSpan],
// and none of Reserve, Debt or Strict beside it.
func checkOp(it *decide.Request) error {
	op := it.Op
	switch {
	case op.Kind < decide.OpRelease || op.Kind > decide.OpSettle:
		return fmt.Errorf("op kind %d is none of release, renew, settle", op.Kind)
	case op.ID == [16]byte{}:
		return errors.New("op id is zero")
	case op.TTL < 0 || op.TTL > permit.MaxTTL:
		return fmt.Errorf("op ttl %dns outside [0, %d]", op.TTL, permit.MaxTTL)
	case op.Actual < 0 || op.Actual > gcra.MaxSpan:
		return fmt.Errorf("op actual %d outside [0, %d]", op.Actual, gcra.MaxSpan)
	case it.Reserve || it.Debt || it.Strict:
		return errors.New("op item with reserve, debt or strict")
	}
	return nil
}

// checkKinds checks what a request asks of its keys' kinds, as its Defs
// (filled from the owner's policy) say:
//   - a concurrency key is never in a strict item or in debt (fallback
//     debt is never recorded for permits);
//   - Reserve only on items, not strict nor debt, whose keys are all fast
//     rate keys or concurrency keys;
//   - an op's keys all resolve in the policy: a Settle's are fast rate
//     keys, a Release's or Renew's concurrency keys.
func checkKinds(it *decide.Request) error {
	if it.Reserve && (it.Strict || it.Debt) {
		return errors.New("reserve on a strict or debt item")
	}
	for i := range it.Keys {
		d := it.Def(i)
		conc := d != nil && d.Concurrency
		switch {
		case conc && (it.Strict || it.Debt):
			return fmt.Errorf("key %d is a concurrency limit's, in a strict or debt item", i)
		case it.Reserve && !conc && d != nil && (d.Strict || d.Global):
			return fmt.Errorf("key %d: reserve on a strict or global limit", i)
		case it.Op == nil:
		case d == nil:
			return fmt.Errorf("key %d of an op is no limit of the owner's policy", i)
		case it.Op.Kind == decide.OpSettle && (conc || d.Strict || d.Global):
			return fmt.Errorf("key %d: settle of a key that is not a fast rate limit's", i)
		case it.Op.Kind != decide.OpSettle && !conc:
			return fmt.Errorf("key %d: release or renew of a key that is not a concurrency limit's", i)
		}
	}
	return nil
}
