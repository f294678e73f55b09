package protocol

// Bounds on terms and ledger values. Every place a term or a ledger value enters a member (the
// wire, the admin API, the embedding API, the durable store) refuses values outside them, so
// no arithmetic on a term or an index can wrap: term+1 and the difference of two ledger indexes
// stay far inside int64. 2^62 terms is more than any group can use (a term a microsecond for
// 146,000 years); reaching MaxTerm stops a member from starting a new term, with an error,
// rather than wrapping to a negative one.
const (
	// MaxTerm is the largest term a member adopts, persists or sends.
	MaxTerm int64 = 1 << 62
	// MaxLedgerValue is the largest ledger end term or index a member accepts.
	MaxLedgerValue int64 = 1 << 62
)
