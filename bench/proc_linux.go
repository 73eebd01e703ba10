package main

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// clockTicks is the unit of the times in /proc/PID/stat (USER_HZ), 100 on
// every Linux architecture Go runs on.
const clockTicks = 100

// procCPU returns the user+sys CPU seconds of process pid so far, from
// /proc/PID/stat; 0 when pid is 0 or unreadable.
func procCPU(pid int) float64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: the fields
	// counted are after its closing one. utime and stime are fields 14
	// and 15 of the line, 12 and 13 after the name.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return float64(u+st) / clockTicks
}

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
