package dledger

// Wake asks the driver to run a pass now: the host's liveness table stopped vouching for a
// peer this member relies on (its host turned stale or restarted, or a change of the group
// arrived), so a pass planned far ahead on the table's word must run at once to look again.
// It only moves the driver's alarm (SetPassAlarm) and does nothing without a driver; it must
// not be called with the elector's lock held.
func (e *Elector) Wake() {
	e.mu.Lock()
	defer e.unlockQuiet()
	if e.plannedPass.IsZero() {
		return // no driver has asked for a plan: nothing to wake
	}
	e.plan(e.clock.Now())
}
