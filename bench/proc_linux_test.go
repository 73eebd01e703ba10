package main

import (
	"os"
	"testing"
	"time"
)

// TestProcCPU: the CPU time read from /proc/PID/stat grows while the
// process works, and is 0 for no process.
func TestProcCPU(t *testing.T) {
	if procCPU(0) != 0 {
		t.Fatal("procCPU(0) is not 0")
	}
	pid := os.Getpid()
	before := procCPU(pid)
	x := 0
	for start := time.Now(); procCPU(pid)-before < 0.05; x++ {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("procCPU stayed at %.2f s through 10 s of work (%d loops)", before, x)
		}
	}
}
