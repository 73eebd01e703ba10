package main

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// childAttr makes a child die with the bench process.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// peakRSS returns this process's peak resident set size in bytes (VmHWM),
// or 0 if unknown. The child's rusage is not used: on Linux, ru_maxrss of a
// process started by os/exec also counts the parent's peak at exec, since
// the child was cloned with the parent's memory (CLONE_VM|CLONE_VFORK).
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// VmHWM:	  123456 kB
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmHWM:")); ok {
			f := bytes.Fields(v)
			if len(f) == 2 && string(f[1]) == "kB" {
				if kb, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
					return kb * 1024
				}
			}
		}
	}
	return 0
}
