// Command antidote is the operations tool of Antidote: a zero-setup demo of a
// poison-pill-proof consumer, dead-letter tooling, a web console for dead
// letters, a poison-pill generator to test any consumer, and antidote run,
// which runs poison-pill-safe consumers from a YAML file and hands their
// records to an HTTP service or a topic.
//
// Exit codes: 0 success, 1 failure, 2 usage error (unknown command or flag,
// bad flag value, missing argument), 130 interrupted.
//
// # Layout
//
// Each verb is a package under internal/ with a NewCommand constructor that
// builds its command tree, and its tests beside it:
//
//   - internal/demo: antidote demo
//   - internal/poison: antidote poison
//   - internal/dlq: antidote dlq (ls, show, stats, redrive, purge)
//   - internal/group: antidote group (describe, rescue)
//   - internal/ctl: antidote ctl, the client of a consumer's admin API
//   - internal/ui: antidote ui, the web console
//   - internal/run: antidote run
//
// Beside them, internal/cli is what every verb shares: the root's persistent
// flags (brokers, contexts, TLS, SASL, output, timeout), dialing the
// cluster, the output helpers and the errors that choose the exit code.
// internal/framed decodes keys and values in the schema registry's wire
// format (ui and group rescue, --registry), and internal/sreg is the demo's
// in-process schema registry. internal/clitest is the test kit of the verbs:
// it runs a command tree in the process the way main does, and only tests
// import it. internal/dlqbench and internal/runbench are benchmark programs.
//
// main stays small: it builds the root with cli.NewRoot, adds each verb's
// command, completes a few flags and exits with the code cli.Execute
// returns. A test checks that the binary links no test code (the testing
// packages, net/http/httptest, the test kits).
package main
