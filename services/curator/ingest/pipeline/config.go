package pipeline

import "time"

// Config is the ingest daemons' configuration.
type Config struct {
	// WorkDir is the working area downloads go to (default: archivist-ingest
	// in the system's temporary directory).
	WorkDir string `env:"INGEST_WORK_DIR"`
	// MinFreeBytes is the free space provisioning keeps in the working area.
	MinFreeBytes int64 `env:"INGEST_MIN_FREE_BYTES, default=1073741824"`
	// LargeJobBytes makes estimating lower a job's priority (5 to 10).
	LargeJobBytes int64 `env:"INGEST_LARGE_JOB_BYTES, default=10737418240"`
	// MaxFileBytes refuses larger files.
	MaxFileBytes int64 `env:"INGEST_MAX_FILE_BYTES, default=107374182400"`
	// AllowedHosts, when set, are the only payload hosts (comma-separated).
	AllowedHosts string `env:"INGEST_ALLOWED_HOSTS"`
	// AllowPrivate allows loopback and private addresses (dev, tests).
	AllowPrivate bool `env:"INGEST_ALLOW_PRIVATE, default=false"`
	// Concurrency is how many jobs each state's daemon works at once.
	Concurrency int `env:"INGEST_CONCURRENCY, default=8"`
	// MaxClaims is how many batches and jobs the process holds claimed at
	// once over all states, each claim holding a PostgreSQL connection,
	// besides one more for each of the 11 states, its own, taken when none
	// of these is free (so no state starves another).
	MaxClaims int `env:"INGEST_MAX_CLAIMS, default=16"`
	// Interval is how long a daemon with nothing to do waits before looking
	// again (provisioning's sleep between passes).
	Interval time.Duration `env:"INGEST_INTERVAL, default=2s"`
	// ResponseTimeout bounds the wait for a response's headers.
	ResponseTimeout time.Duration `env:"INGEST_RESPONSE_TIMEOUT, default=30s"`
	// IdleTimeout fails a download or manifest whose body stalls this long.
	IdleTimeout time.Duration `env:"INGEST_IDLE_TIMEOUT, default=60s"`
	// MinThroughput fails a download (or manifest) whose body brings fewer
	// bytes a second than this over INGEST_THROUGHPUT_WINDOW (0: no
	// bound): a trickled download ends within a window, and its job is
	// tried again after a backoff, as after any failed attempt.
	MinThroughput    int64         `env:"INGEST_MIN_THROUGHPUT, default=1024"`
	ThroughputWindow time.Duration `env:"INGEST_THROUGHPUT_WINDOW, default=1m"`
	// DepositorShare is the most of a state's INGEST_CONCURRENCY one
	// depositor's batches or jobs hold at once while another depositor's
	// wait, in percent (at least one): no depositor shuts the others out,
	// and one alone uses every slot.
	DepositorShare int `env:"INGEST_DEPOSITOR_SHARE, default=50"`
	// RequestTimeout bounds a whole HEAD request or callback.
	RequestTimeout time.Duration `env:"INGEST_REQUEST_TIMEOUT, default=1m"`
	// StepTimeout bounds one attempt at any state's work (a download
	// trickled byte by byte, which the idle timeout never ends, included):
	// beyond it the attempt fails and is tried again after a backoff.
	StepTimeout time.Duration `env:"INGEST_STEP_TIMEOUT, default=6h"`
	// EstimateTimeout bounds estimating a job's size (its HEAD requests,
	// several at once): sizes not known by then are left unknown, and
	// downloading checks the working area's room as their bytes arrive.
	EstimateTimeout time.Duration `env:"INGEST_ESTIMATE_TIMEOUT, default=10m"`
	// JobTimeout fails a batch or job whose workers have worked on it this
	// long over all its attempts and states (waits, backoffs and outages
	// not counted); 0: no bound.
	JobTimeout time.Duration `env:"INGEST_JOB_TIMEOUT, default=48h"`
	// HTTPProxy, if set, is the proxy every outgoing request goes through
	// (environment proxies are ignored); the proxy must then enforce the
	// address rules the dial guard enforces without one.
	HTTPProxy string `env:"INGEST_HTTP_PROXY"`
	// MaxManifestBytes bounds one manifest (after transfer decompression).
	MaxManifestBytes int64 `env:"INGEST_MAX_MANIFEST_BYTES, default=16777216"`
	// MaxManifestRows bounds the rows of one manifest, so the jobs of a
	// batch manifest and the files of an object manifest.
	MaxManifestRows int `env:"INGEST_MAX_MANIFEST_ROWS, default=100000"`
	// MaxBatchFiles bounds the files of all the jobs of one batch.
	MaxBatchFiles int `env:"INGEST_MAX_BATCH_FILES, default=200000"`
	// MaxZipEntries bounds the entries of a container.
	MaxZipEntries int `env:"INGEST_MAX_ZIP_ENTRIES, default=10000"`
	// MaxZipRatio bounds how many times larger a container's content is
	// than the container (beyond 16 MiB of content).
	MaxZipRatio int64 `env:"INGEST_MAX_ZIP_RATIO, default=100"`
	// Retries is how many times a download or callback is tried.
	Retries int `env:"INGEST_RETRIES, default=3"`
	// MaxAttempts fails a batch or job after this many claims at one state
	// without moving on (failed attempts, or workers that crashed or hung
	// on it), where the transition table lets the daemon fail it.
	MaxAttempts int `env:"INGEST_MAX_ATTEMPTS, default=5"`
	// RetryMax caps the wait after a failed attempt (the first waits
	// INGEST_INTERVAL, each further one twice as long).
	RetryMax time.Duration `env:"INGEST_RETRY_MAX, default=10m"`
	// RetryBudget is how long a batch's or job's attempts at one state may
	// keep failing for a cause that may pass (an origin or a callback
	// down, the store refusing) before it is failed, once it has also had
	// INGEST_MAX_ATTEMPTS attempts. An outage of PostgreSQL, NATS or the
	// blob store spends nothing: the daemons pause.
	RetryBudget time.Duration `env:"INGEST_RETRY_BUDGET, default=24h"`
	// Retention is how long a completed batch (and its jobs) is kept
	// before the automatic cleanup deletes it (Batch: Completed →
	// Deleted); 0 keeps every batch until an operator cleans up.
	Retention time.Duration `env:"INGEST_RETENTION, default=720h"`
	// TidyInterval is how often the working area is tidied (the
	// directories of jobs that ended, or need none, removed) and batches
	// past INGEST_RETENTION cleaned up; provisioning that finds no room
	// tidies at once.
	TidyInterval time.Duration `env:"INGEST_TIDY_INTERVAL, default=1m"`
	// EZIDURL, when set, has ARKs registered with EZID there (e.g.
	// https://ezid.cdlib.org) in the shoulder INGEST_ARK_PREFIX, as
	// INGEST_EZID_USER; unset, the local minter mints them (development).
	EZIDURL      string `env:"INGEST_EZID_URL"`
	EZIDUser     string `env:"INGEST_EZID_USER"`
	EZIDPassword string `env:"INGEST_EZID_PASSWORD"`
	// EZIDTarget is where an ARK resolves to, "{ark}" replaced by it ("":
	// EZID's default).
	EZIDTarget string `env:"INGEST_EZID_TARGET"`
	// SMTPAddr is the SMTP server (host:port) the collections' mails go
	// through; unset, they are written to the log (development).
	SMTPAddr string `env:"INGEST_SMTP_ADDR"`
	// SMTPPlain sends to a server that offers no STARTTLS, in clear (a
	// relay on a trusted network); otherwise such a server gets no mail.
	SMTPPlain    bool   `env:"INGEST_SMTP_PLAIN, default=false"`
	SMTPUser     string `env:"INGEST_SMTP_USER"`
	SMTPPassword string `env:"INGEST_SMTP_PASSWORD"`
	// MailFrom is the mails' sender.
	MailFrom string `env:"INGEST_MAIL_FROM, default=archivist@localhost"`
	// ARKPrefix is the shoulder ARKs are minted in (the local minter's, or
	// EZID's).
	ARKPrefix string `env:"INGEST_ARK_PREFIX, default=ark:/99999/fk4"`
}
