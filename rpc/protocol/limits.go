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

// Bounds on configurations (issue 31, docs/protocol.md 13): a configuration names at most
// MaxConfigMembers members, voters and non-voters together, and its epoch is at most
// MaxConfigEpoch, so epoch+1 cannot wrap. A configuration on the wire is two peers strings
// (id-host:port;...), each at most MaxConfigMembers x (64-byte id + '-' + 261-byte address + ';').
const (
	MaxConfigMembers = 64
	MaxConfigEpoch   = uint64(1) << 62
	MaxPeersString   = MaxConfigMembers * (64 + 1 + 261 + 1)
	// MaxKeysString bounds a configuration's member keys on the wire (issue 32): at most one
	// per member, id-key;... with a 44-byte base64 key.
	MaxKeysString = MaxConfigMembers * (64 + 1 + 44 + 1)
)
