// Package promises holds the model of the archive's promises
// (docs/PROMISES.md): TestArchiveModel runs the real curator, indexer,
// aggregator and auditor as processes through random, seeded histories
// and checks every invariant after each round. It is a package of its own
// so that it runs beside the other end-to-end tests, with a test timeout of
// its own.
package promises
