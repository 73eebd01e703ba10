// Package console is a web console for dead letters and stuck partitions:
// the dead-letter topics with their counts; for one topic, its letters over
// time by reason, stage or class, the top errors, and a table that pages and
// filters as antidote dlq ls does; one letter with its failure in plain
// words, its original coordinates, key, value and headers; redrive of picked
// letters or of a filter, with a dry run first, and the purge of the letters
// a redrive redrove; and, for running consumers, their partitions (state,
// stuck since, lag), the retry kill switch, skip of a stuck record or its
// dead letter, pause and resume, and the flood guard.
//
// It is a plain [http.Handler] built by [New] from the standard library,
// franz-go and the deadletter and admin packages. Pages are rendered on the
// server with html/template; every asset is embedded (go:embed), the chart
// is SVG drawn by the server, and the only script picks every letter of a
// page (and goes on from the page a provider's login ends on). Serve it
// with antidote ui, mount it on the admin API ([admin.Config.Console],
// under /ui/), or on a server of your own.
//
// # Safe by default
//
//   - Listen on loopback, as the admin API does; on another address, over
//     TLS only: a request over plain HTTP that reaches the console on a
//     listener other than loopback is answered 403 with what to do
//     (antidote ui refuses such an address without --https-cert;
//     admin.Handler.Listen without admin.Config.TLS).
//   - A login page asks for the token ([Config.Token], else
//     ANTIDOTE_ADMIN_TOKEN, else a random one logged once) and starts a
//     session: a random id kept by the server, in an HttpOnly,
//     SameSite=Strict cookie (Secure over TLS, or behind a proxy that says
//     X-Forwarded-Proto: https). A session ends at logout (its cookie,
//     wherever a copy is kept, no longer works), after [Config.SessionIdle]
//     without a request, and [Config.SessionMax] after its login. Scripts
//     may send "Authorization: Bearer <token>" instead (such a request
//     needs no CSRF token: a browser never adds the header by itself).
//   - After ten wrong tokens, logins are answered 429 until tries come
//     back, one every five seconds.
//   - After the login, the browser goes back only to a path of the console
//     (no scheme, host, control byte, backslash, "//", "." or "..").
//   - Every action is a POST with the CSRF token of the session, and an
//     Origin of the same host when the browser sends one; no GET changes
//     anything.
//   - On a loopback listener, a request whose Host is not localhost or a
//     loopback address (DNS rebinding) is answered 421.
//   - The Content-Security-Policy forbids inline scripts and styles and
//     anything from elsewhere; frames are refused.
//
// # A console a team shares
//
// [Config.Login] adds a login beside the token, such as OpenID Connect
// (package console/oidc, a module of its own): the authorization code
// flow with PKCE, whose state, nonce and verifier the console keeps for
// ten minutes, the state bound to the browser by a cookie and accepted
// once. Its users are viewers or operators ([Role]); the token's callers
// are operators. A viewer reads every page; every operator action
// (redrive, stop a redrive, purge, the kill switch, skip, dead-letter,
// pause, resume, the flood guard) is greyed out in their pages and answered 403
// with why. Each operator action, and each refused try, is kept in an
// audit log of the last [Config.AuditSize] ([AuditEntry]: who, role,
// what, on what, when, the result), logged at Warn, shown at audit and
// served as JSON at audit.json ([Handler.Audit]).
//
// # Record contents are hostile
//
// Keys, values, headers and error messages are escaped by html/template and
// shown by [Visible]: bytes that are not UTF-8, ANSI escapes and other
// control or bidirectional characters appear as Go escapes (\x1b, \xff,
// \u202e). A key or value longer than [Config.ShowBytes] is cut, with a
// "show all" link. [Config.HideValues] shows keys, values and original
// header values as their size and SHA-256 only.
//
// # Bounded memory
//
// The table reads the topic partition after partition, as [deadletter.Scan]
// does, and keeps one page; the next page starts from a cursor (partition
// and offset) in its link. The counts and the chart of the first page are
// kept as the letters are read: at most 40 distinct stages, classes and
// reasons, the 100 most frequent errors (space-saving), and 120 time
// buckets whose width grows with the time span.
//
// # Redrive
//
// A redrive is [deadletter.Redrive], as antidote dlq redrive runs it: the
// dry run counts what would be redriven and refused, the confirmation page
// starts it, and its page shows the progress. Its progress group is the
// command's for the same filter ([deadletter.RedriveConfig.DefaultGroup]),
// so a redrive stopped in one resumes in the other, and the loop guard
// ([deadletter.RedriveConfig.MaxRedrives]) refuses records redriven too
// often. Letters picked one by one are [deadletter.RedriveConfig.Letters].
//
// # Purge
//
// Once a redrive started in the console has finished, its page offers to
// purge the letters it redrove, as antidote dlq purge --redriven does:
// [deadletter.RedrivenPrefix] reads each partition from its log start up to
// the redrive's progress and stops below the first letter the redrive
// passed over or refused, and Kafka's DeleteRecords deletes the letters
// below. A page shows the plan first (per partition the offsets deleted,
// the progress, where it stops and why); its form, confirmed, deletes no
// more than that plan, and no more than the redrive's letters found again
// then, so that a letter that was never redriven is never deleted. A
// redrive whose until is relative to when it ran cannot be purged: a run
// of it at another time passed over letters it selects. Deleting below an
// arbitrary offset, or everything, is left to antidote dlq purge --offset
// and --all.
package console
