package cdxindex

// Query selects lines by URL key.
type Query struct {
	// Key is the SURT key (exact), or key prefix (Prefix).
	Key string
	// Prefix matches every key that starts with Key.
	Prefix bool
	// From and To bound the timestamp (a prefix of 14 digits); empty is open.
	From, To string
	// Limit caps the lines returned (0: no cap).
	Limit int
}

// maxLine bounds a line read from an index (the indexer's lines are at
// most about 1 MiB).
const maxLine = 2 << 20
