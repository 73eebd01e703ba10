package integration_test

import "github.com/antidote-kafka/antidote/deadletter/internal/letters"

// The letters of each dialect, from deadletter/internal/letters.
type hs = letters.HS

var (
	h              = letters.H
	be32           = letters.BE32
	be64           = letters.BE64
	ts0            = letters.TS0
	springLetter   = letters.Spring
	connectLetter  = letters.Connect
	streamsLetter  = letters.Streams
	shareLetter    = letters.Share
	antidoteLetter = letters.Antidote
)
