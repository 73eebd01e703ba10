// Package e2e tests the console in a real browser: Debian's Chromium,
// driven headless over the DevTools protocol with chromedp, against the
// console on a real cluster (internal/kafkatest: kfake, or the broker of
// ANTIDOTE_KAFKA_BROKERS). It is a module of its own so that the core
// module gains no dependency.
//
// The browser is found at $ANTIDOTE_CHROMIUM, else /usr/bin/chromium,
// /usr/bin/chromium-browser or /usr/bin/google-chrome; without one the
// tests skip, unless CI=true (scripts/test.sh installs Chromium). With
// ANTIDOTE_SCREENSHOTS=DIR the tests write screenshots of the main pages
// into DIR (make screenshots puts two of them in docs/).
//
// TestIntegrationConsoleOIDC logs in through a real OpenID Connect provider
// by its own login form: the Dex of scripts/dex.sh, whose issuer and the
// console URL its client accepts are ANTIDOTE_OIDC_ISSUER and
// ANTIDOTE_OIDC_CONSOLE (eval "$(scripts/dex.sh env)"); without them it
// skips.
package e2e
