package integration_test

import "github.com/antidote-kafka/antidote/deadletter/internal/letters"

// The letters of each dialect, from deadletter/internal/letters.
type hs = letters.HS

var (
	h              = letters.H
	springLetter   = letters.Spring
	connectLetter  = letters.Connect
	streamsLetter  = letters.Streams
	shareLetter    = letters.Share
	antidoteLetter = letters.Antidote
)
