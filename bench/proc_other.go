//go:build !linux

package main

import "syscall"

// childAttr: only Linux can tie a child's life to its parent's.
func childAttr() *syscall.SysProcAttr { return nil }

// peakRSS is only known on Linux (VmHWM).
func peakRSS() int64 { return 0 }

// procCPU is only known on Linux (/proc/PID/stat).
func procCPU(int) float64 { return 0 }
