module github.com/antidote-kafka/antidote/console/oidc

go 1.26.0

require (
	github.com/antidote-kafka/antidote v0.1.0
	github.com/coreos/go-oidc/v3 v3.19.0
	golang.org/x/oauth2 v0.38.0
)

require (
	github.com/go-jose/go-jose/v4 v4.1.4 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/twmb/franz-go v1.22.3 // indirect
	github.com/twmb/franz-go/pkg/kadm v1.20.0 // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.1 // indirect
	github.com/twmb/franz-go/plugin/kslog v1.0.0 // indirect
)
