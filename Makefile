# Targets people run. `make test` is the README's test command and what CI runs.
.PHONY: test unit lint kafka-start kafka-stop demo bench fuzz screenshots chaos image chart

test:            ## everything: lint, unit tests on kfake, integration tests on a real broker
	scripts/test.sh

unit:            ## unit and kfake integration tests only, no real broker
	SKIP_REAL_KAFKA=1 scripts/test.sh

lint:            ## gofmt, go vet, staticcheck
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	go vet work
	go tool staticcheck work

demo:            ## the demo, on an in-process cluster
	go run ./cmd/antidote demo

bench:           ## the end-to-end benchmark against the real test broker
	scripts/kafka.sh start
	go run ./bench -brokers 127.0.0.1:39092

chaos:           ## a bounded sample of randomized fault runs: kfake, then the three-broker cluster
	scripts/chaos.sh

image:           ## the OCI image of antidote in .cache/image (no daemon, no base image); VERSION=v0.2.0 to choose its version
	scripts/image.sh $(VERSION)

chart:           ## lint and render the Helm chart deploy/helm/antidote and check the manifests (helm from the Go module proxy)
	scripts/chartcheck.sh

kafka-start:     ## start the real test broker (prints its address)
	scripts/kafka.sh start

kafka-stop:
	scripts/kafka.sh stop

FUZZTIME ?= 30s
fuzz:            ## run every fuzz target for FUZZTIME each
	@for pkg in $$(go list work); do \
	  for f in $$(go test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; go test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

screenshots:     ## the console's screenshots in docs/ (its browser tests, on kfake, with Chromium; Dex for the shared console's)
	rm -rf .cache/screenshots
	cd console/e2e && ANTIDOTE_SCREENSHOTS=$(CURDIR)/.cache/screenshots go test -count=1 -run 'ConsoleDialects|ConsoleLive|ConsolePurge' .
	issuer="$$(scripts/dex.sh start)" && eval "$$(scripts/dex.sh env)" && \
	  (cd console/e2e && ANTIDOTE_SCREENSHOTS=$(CURDIR)/.cache/screenshots go test -count=1 -run 'ConsoleOIDC' .); \
	  rc=$$?; scripts/dex.sh stop; exit $$rc
	mkdir -p docs
	cp .cache/screenshots/topic-dialects.png docs/console-topic.png
	cp .cache/screenshots/letter-spring.png docs/console-letter.png
	cp .cache/screenshots/live.png docs/console-live.png
	cp .cache/screenshots/purge.png docs/console-purge.png
	cp .cache/screenshots/oidc-viewer-consumer.png docs/console-viewer.png
	cp .cache/screenshots/oidc-audit.png docs/console-audit.png
