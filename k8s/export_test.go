package k8s

// LeaderSessions exposes leaderSessions to the tests.
var LeaderSessions = leaderSessions
